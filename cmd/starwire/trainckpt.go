package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/train"
)

// checkpointFlags are train's checkpoint flags, those of TensorFlow's
// MonitoredTrainingSession.
type checkpointFlags struct {
	dir   string
	steps int64
	secs  int
	keep  int
	// Increments between full checkpoints, of the hash embedding alone;
	// inFlight is train.SaverOptions.InFlight, the job's to set.
	incrSteps int64
	incrSecs  int
	maxIncr   int
	inFlight  int64
}

func (c *checkpointFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.dir, "checkpoint_dir", "", "restore the model from the newest checkpoint in DIR, if any, and save checkpoints there; the parameter servers write it (a local cluster's tasks are given it, a cluster's must have a --checkpoint_dir covering it) and train reads it, so it must be shared")
	fs.Int64Var(&c.steps, "save_checkpoint_steps", 0, "save a checkpoint every N global steps (0: by --save_checkpoint_secs alone)")
	fs.IntVar(&c.secs, "save_checkpoint_secs", 600, "save a checkpoint every S seconds (0: by --save_checkpoint_steps alone); one is saved at the end in any case")
	fs.IntVar(&c.keep, "keep_checkpoint_max", 5, "checkpoints kept, the newest (0: all)")
	fs.Int64Var(&c.incrSteps, "save_incremental_checkpoint_steps", 0, "with --embedding hash, save between full checkpoints an increment every N global steps: the embedding rows changed since the last save, and the global step (0: by --save_incremental_checkpoint_secs alone); a restore takes the newest full checkpoint and each of its increments")
	fs.IntVar(&c.incrSecs, "save_incremental_checkpoint_secs", 0, "with --embedding hash, save an increment every S seconds after the last save (0: by --save_incremental_checkpoint_steps alone)")
	fs.IntVar(&c.maxIncr, "max_incremental_checkpoints", 10, "increments of one full checkpoint at most, which bounds what a restore applies: after N the next save due is a full one (0: unbounded)")
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
	case c.incrSteps < 0:
		return flags.Usagef("train: --save_incremental_checkpoint_steps %d, want >= 0", c.incrSteps)
	case c.incrSecs < 0:
		return flags.Usagef("train: --save_incremental_checkpoint_secs %d, want >= 0", c.incrSecs)
	case c.maxIncr < 0:
		return flags.Usagef("train: --max_incremental_checkpoints %d, want >= 0", c.maxIncr)
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

// startCheckpoints restores job from the newest checkpoint of
// --checkpoint_dir, if any, and returns the saver, installed as the job's
// AfterStep hook; without --checkpoint_dir it returns nil.
func (c *checkpointFlags) start(ctx context.Context, job *trainJob, stdout io.Writer) (*train.CheckpointSaverHook, error) {
	if c.dir == "" {
		return nil, nil
	}
	h := train.NewCheckpointSaverHook(job, train.SaverOptions{Dir: c.dir, Steps: c.steps, Secs: c.secs, Keep: c.keep,
		Probe: job.s.ProbeCheckpointDir, IncrSteps: c.incrSteps, IncrSecs: c.incrSecs, MaxIncrements: c.maxIncr, InFlight: c.inFlight, Oldest: job.s.OldestInFlight,
		Last: job.s.LastStep})
	restored, prefix, step, err := h.Begin(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("train: %w", err)
	case !restored:
		fmt.Fprintf(stdout, "no checkpoint in %s: training from scratch\n", c.dir)
	default:
		fmt.Fprintf(stdout, "restored %s (global step %d)\n", filepath.Base(prefix), step)
	}
	job.s.AfterStep(h.AfterStep)
	return h, nil
}

// finishCheckpoints saves the final model unless its step is saved
// already, and says what was saved.
func (c *checkpointFlags) finish(ctx context.Context, h *train.CheckpointSaverHook, stdout io.Writer) error {
	if h == nil {
		return nil
	}
	step, err := h.End(ctx)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	n, took := h.Saves()
	incr := ""
	if c.incrSteps > 0 || c.incrSecs > 0 {
		incr = " and " + plural(h.Increments(), "increment")
	}
	fmt.Fprintf(stdout, "saved %s (global step %d) in %s; %s%s saved this run\n",
		lr.CheckpointPrefix(c.dir, step), step, took.Round(time.Microsecond), plural(n, "checkpoint"), incr)
	return nil
}

// saveOnStopTimeout bounds the save of a run stopped by a signal; a second
// signal ends the wait at once (see stopper).
const saveOnStopTimeout = 30 * time.Second

// saveOnStop saves the model when a signal stopped the run (ctx's cause),
// as a CheckpointSaverHook's end does, so that the steps made are not
// lost; without --checkpoint_dir, or for another end, it does nothing.
func (c *checkpointFlags) saveOnStop(ctx context.Context, h *train.CheckpointSaverHook, stdout io.Writer) error {
	var stopped *stopError
	if h == nil || !errors.As(context.Cause(ctx), &stopped) || stopped.sig == 0 {
		return nil
	}
	fmt.Fprintf(stdout, "%s: saving a checkpoint before exiting (up to %v; a second signal exits at once)\n", stopped, saveOnStopTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), saveOnStopTimeout)
	defer cancel()
	return c.finish(sctx, h, stdout)
}
