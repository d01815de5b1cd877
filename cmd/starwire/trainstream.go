package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/handlers/embedding/changes"
)

// streamFlags are train's change stream flags.
type streamFlags struct {
	dir   string
	every int64
	keep  int
}

func (c *streamFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "stream_dir", "", "with --embedding hash: export the embedding's change stream for online serving into DIR every --stream_every global steps and at the end (a local cluster's ps tasks are given it, a cluster's must have serve --stream_dir); starwire checkpoint follow DIR replays it")
	fs.Int64Var(&c.every, "stream_every", 100, "with --stream_dir: global steps between versions of the change stream")
	fs.IntVar(&c.keep, "stream_keep", changes.DefaultKeep, keepUsage+" (a cluster's ps tasks keep what their serve --stream_keep says)")
}

// prepare checks the flags and makes the directory absolute and present.
func (c *streamFlags) prepare(cfg lr.Config) error {
	switch {
	case c.dir == "":
		return nil
	case c.keep < 0:
		return flags.Usagef("train: --stream_keep %d, want >= 0", c.keep)
	case c.every <= 0:
		return flags.Usagef("train: --stream_every %d, want > 0", c.every)
	case cfg.Embedding != "hash":
		return flags.Usagef("train: --stream_dir exports the hash embedding's changes: give --embedding hash")
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return flags.Usagef("train: --stream_dir %s: %v", c.dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: --stream_dir: %w", err)
	}
	c.dir = dir
	return nil
}

// A streamHook exports a version every --stream_every global steps.
type streamHook struct {
	e     *lr.StreamExporter
	every int64
	// oldest is the session's OldestInFlight: a version holds the updates
	// of the steps before it, so that no lagging worker's is missed.
	oldest func() int64

	mu      sync.Mutex
	next    int64 // the global step of the next export
	exports int
}

// start installs the export as the job's AfterStep hook; without
// --stream_dir it returns nil.
func (c *streamFlags) start(job *trainJob, workers int) (*streamHook, error) {
	if c.dir == "" {
		return nil, nil
	}
	e, err := job.NewStreamExporter()
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	h := &streamHook{e: e, every: c.every, oldest: job.s.OldestInFlight, next: job.GlobalStep() + c.every}
	job.s.AfterStep(h.afterStep)
	return h, nil
}

func (h *streamHook) afterStep(ctx context.Context, globalStep int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if globalStep < h.next {
		return nil
	}
	h.next = globalStep + h.every
	h.exports++
	return h.e.Export(ctx, h.oldest(), 0)
}

// finish exports the last version, every worker stopped, and says how
// many were exported.
func (h *streamHook) finish(ctx context.Context, job *trainJob, dir string, stdout io.Writer) error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	step := job.GlobalStep()
	if err := h.e.Export(ctx, step+1, 0); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	fmt.Fprintf(stdout, "exported the change stream to global step %d into %s (%d exports this run)\n", step, dir, h.exports+1)
	return nil
}
