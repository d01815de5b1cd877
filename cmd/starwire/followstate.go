package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding/changes"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// followState is what checkpoint follow --state_file records: the
// stream followed and the last version applied.
type followState struct {
	Stream  string `json:"stream"`
	Version int64  `json:"version"`
}

// readFollowState returns the version the state file at path says was
// applied last of the stream in dir, 0 when the file is missing.
func readFollowState(path, dir string) (int64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, fmt.Errorf("read --state_file: %w", err)
	}
	var s followState
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, fmt.Errorf("--state_file %s: %v", path, err)
	}
	switch {
	case s.Version < 0:
		return 0, fmt.Errorf("--state_file %s: version %d", path, s.Version)
	case s.Stream != dir:
		return 0, fmt.Errorf("--state_file %s is of the stream in %s, not %s", path, s.Stream, dir)
	}
	return s.Version, nil
}

// writeFollowState records in the state file at path that version v of
// the stream in dir was applied: written to a temporary file, synced,
// renamed over the old one and the directory synced, so that a restart
// reads the old record or the new one, whole.
func writeFollowState(path, dir string, v int64) error {
	b, err := json.Marshal(followState{Stream: dir, Version: v})
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("write --state_file: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write --state_file: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write --state_file: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("write --state_file: sync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// saveFollowed saves f's tables as a checkpoint at prefix, each as an
// embedding variable's primary is saved (ops' kv_checkpoint.go): its
// ids, values, lookup counts and versions, in the order of a snapshot.
func saveFollowed(prefix string, f *changes.Follower) error {
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return err
	}
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err != nil {
		return err
	}
	for _, name := range f.Tables() {
		s := f.Table(name).Snapshot()
		n := int64(len(s.IDs))
		for _, t := range []struct {
			suffix string
			t      wire.Tensor
		}{
			{"-freqs", wire.Tensor{DType: wire.DTInt64, Shape: []int64{n}, Data: tensor.Bytes(s.Freqs)}},
			{"-keys", wire.Tensor{DType: wire.DTInt64, Shape: []int64{n}, Data: tensor.Bytes(s.IDs)}},
			{"-values", wire.Tensor{DType: wire.DTFloat, Shape: []int64{n, int64(s.Dim)}, Data: tensor.Bytes(s.Values)}},
			{"-versions", wire.Tensor{DType: wire.DTInt64, Shape: []int64{n}, Data: tensor.Bytes(s.Versions)}},
		} {
			if err := w.Add(name+t.suffix, &t.t); err != nil {
				w.Abort()
				return err
			}
		}
	}
	return w.Finish()
}
