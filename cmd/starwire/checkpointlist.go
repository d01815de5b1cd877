package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// listCheckpoints prints dir's checkpoints, oldest first, each full one
// and then its increments:
//
//	full       model.ckpt-100                                            global step 100  2.1 MB
//	increment  .incremental_checkpoint/model.ckpt-100/incr-model.ckpt-110  global step 110  41.0 kB
func listCheckpoints(w io.Writer, dir string) error {
	st, err := checkpoint.ReadState(dir)
	if err != nil {
		return fmt.Errorf("checkpoint inspect --list %s: %w", dir, err)
	}
	for _, p := range st.AllModelCheckpointPaths {
		full := p
		if !filepath.IsAbs(full) {
			full = filepath.Join(dir, p)
		}
		if err := listOne(w, dir, "full", full); err != nil {
			return err
		}
		incrs, err := checkpoint.Increments(dir, full)
		if err != nil {
			return fmt.Errorf("checkpoint inspect --list %s: %w", dir, err)
		}
		for _, q := range incrs {
			if err := listOne(w, dir, "increment", q); err != nil {
				return err
			}
		}
	}
	return nil
}

// listOne prints one line of listCheckpoints.
func listOne(w io.Writer, dir, kind, prefix string) error {
	name, err := filepath.Rel(dir, prefix)
	if err != nil {
		name = prefix
	}
	step := "global step ?"
	if r, err := checkpoint.Open(prefix); err == nil {
		if t, err := r.Read("global_step"); err == nil && t.DType == wire.DTInt64 && len(t.Data) == 8 {
			step = fmt.Sprintf("global step %d", tensor.View[int64](t.Data)[0])
		}
		r.Close()
	} else {
		return fmt.Errorf("checkpoint inspect --list: %w", err)
	}
	files, _ := filepath.Glob(prefix + ".*")
	var size int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		}
	}
	_, err = fmt.Fprintf(w, "%-10s %s  %s  %s\n", kind, name, step, byteSize(size))
	return err
}

// byteSize is n bytes in kB, MB or GB (powers of 1000).
func byteSize(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
