package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/cmd/starwire/internal/lr"
)

// checkpointFlags are train's checkpoint flags, those of TensorFlow's
// MonitoredTrainingSession.
type checkpointFlags struct {
	dir   string
	steps int64
	secs  int
	keep  int
}

func (c *checkpointFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "checkpoint_dir", "", "restore the model from the newest checkpoint in DIR, if any, and save checkpoints there; the parameter servers write it (a local cluster's tasks are given it, a cluster's must have a --checkpoint_dir covering it) and train reads it, so it must be shared")
	fs.Int64Var(&c.steps, "save_checkpoint_steps", 0, "save a checkpoint every N global steps (0: by --save_checkpoint_secs alone)")
	fs.IntVar(&c.secs, "save_checkpoint_secs", 600, "save a checkpoint every S seconds (0: by --save_checkpoint_steps alone); one is saved at the end in any case")
	fs.IntVar(&c.keep, "keep_checkpoint_max", 5, "checkpoints kept, the newest (0: all)")
}

// prepare checks the flags, makes the directory absolute, as the tasks
// resolve prefixes against theirs, and creates it.
func (c *checkpointFlags) prepare() error {
	switch {
	case c.steps < 0:
		return flags.Usagef("train: --save_checkpoint_steps %d, want >= 0", c.steps)
	case c.secs < 0:
		return flags.Usagef("train: --save_checkpoint_secs %d, want >= 0", c.secs)
	case c.keep < 0:
		return flags.Usagef("train: --keep_checkpoint_max %d, want >= 0", c.keep)
	case c.dir == "":
		return nil
	}
	dir, err := filepath.Abs(c.dir)
	if err != nil {
		return flags.Usagef("train: --checkpoint_dir %s: %v", c.dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("train: --checkpoint_dir: %w", err)
	}
	c.dir = dir
	return nil
}

// A saver saves a job's checkpoints as its flags say, as TensorFlow's
// CheckpointSaverHook does: after a step, when the global step has moved
// on by --save_checkpoint_steps or --save_checkpoint_secs have passed
// since the last save, and once more at the end.
type saver struct {
	f   *checkpointFlags
	job *lr.Job
	mu  sync.Mutex // held while saving
	// lastStep and lastAt are the last save's (or the start's).
	lastStep int64
	lastAt   time.Time
	saves    int
	took     time.Duration // the last save's
	now      func() time.Time
}

// startCheckpoints restores job from the newest checkpoint of
// --checkpoint_dir, if any, and returns the saver, installed as the job's
// AfterStep hook; without --checkpoint_dir it returns nil.
func (c *checkpointFlags) start(ctx context.Context, job *lr.Job, stdout io.Writer) (*saver, error) {
	if c.dir == "" {
		return nil, nil
	}
	step, prefix, err := job.Restore(ctx, c.dir)
	switch {
	case errors.Is(err, lr.ErrNoCheckpoint):
		fmt.Fprintf(stdout, "no checkpoint in %s: training from scratch\n", c.dir)
	case err != nil:
		return nil, fmt.Errorf("train: %w", err)
	default:
		fmt.Fprintf(stdout, "restored %s (global step %d)\n", filepath.Base(prefix), step)
	}
	s := &saver{f: c, job: job, lastStep: job.GlobalStep(), now: time.Now}
	s.lastAt = s.now()
	job.AfterStep(s.afterStep)
	return s, nil
}

// due says whether a save is due at global step step.
func (s *saver) due(step int64) bool {
	return (s.f.steps > 0 && step >= s.lastStep+s.f.steps) ||
		(s.f.secs > 0 && s.now().Sub(s.lastAt) >= time.Duration(s.f.secs)*time.Second)
}

// afterStep saves when a save is due; a worker that finds another saving
// goes on training, as only TensorFlow's chief saves.
func (s *saver) afterStep(ctx context.Context, step int64) error {
	if !s.mu.TryLock() {
		return nil
	}
	defer s.mu.Unlock()
	if !s.due(step) {
		return nil
	}
	return s.save(ctx, step)
}

// save saves the checkpoint of step; s.mu is held.
func (s *saver) save(ctx context.Context, step int64) error {
	start := s.now()
	if _, err := s.job.Save(ctx, s.f.dir, step, s.f.keep); err != nil {
		return err
	}
	s.lastStep, s.lastAt, s.took = step, s.now(), s.now().Sub(start)
	s.saves++
	return nil
}

// finish saves the final model unless its step is saved already, and says
// what was saved.
func (s *saver) finish(ctx context.Context, stdout io.Writer) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	step := s.job.GlobalStep()
	if step != s.lastStep {
		if err := s.save(ctx, step); err != nil {
			return fmt.Errorf("train: %w", err)
		}
	}
	fmt.Fprintf(stdout, "saved %s (global step %d) in %s; %s saved this run\n",
		lr.CheckpointPrefix(s.f.dir, step), step, s.took.Round(time.Microsecond), plural(s.saves, "checkpoint"))
	return nil
}
