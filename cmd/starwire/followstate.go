package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
