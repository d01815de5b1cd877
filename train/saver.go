package train

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
)

// A Checkpointer saves and restores a model's variables in a checkpoint
// directory, as TensorFlow's Saver does; GlobalStep is the model's global
// step now. Save and Restore are called one at a time.
type Checkpointer interface {
	// Save saves the model as of globalStep into dir, keeps the newest
	// keep checkpoints (keep <= 0 keeps all) and returns the prefix.
	Save(ctx context.Context, dir string, globalStep int64, keep int) (prefix string, err error)
	// Restore restores the newest checkpoint of dir and returns its global
	// step and prefix; an error wrapping checkpoint.ErrNoCheckpoint says
	// that dir holds none.
	Restore(ctx context.Context, dir string) (globalStep int64, prefix string, err error)
	GlobalStep() int64
}

// SaverOptions say where and when a CheckpointSaverHook saves.
type SaverOptions struct {
	// Dir is the checkpoint directory, absolute; the tasks that save must
	// be able to write it.
	Dir string
	// Steps and Secs save every Steps global steps or every Secs seconds,
	// whichever comes first; 0 turns either off.
	Steps int64
	Secs  int
	// Keep is how many of the newest checkpoints are kept (0: all).
	Keep int
	// Probe, when set, is called by Begin first: it checks that every task
	// that saves can save into Dir (Session.ProbeCheckpointDir).
	Probe func(ctx context.Context, dir string) error
	// Now, when set, is the hook's clock; nil means time.Now.
	Now func() time.Time
	// IncrSteps and IncrSecs save an increment (IncrementalCheckpointer)
	// every IncrSteps global steps or IncrSecs seconds after the last save
	// of either kind, between full checkpoints; 0 and 0 save none.
	IncrSteps int64
	IncrSecs  int
	// MaxIncrements bounds the increments of one full checkpoint, and so
	// what a restore applies: once a full checkpoint has MaxIncrements,
	// the next save due is a full one; 0 bounds nothing.
	MaxIncrements int
	// InFlight is how many global steps a step's reading of the global
	// step (the version of the rows it updates) may lag the global step
	// when it applies: an increment takes the rows changed since the last
	// save's step less InFlight. Too small loses updates, too large saves
	// a few rows twice.
	InFlight int64
	// Oldest, when set, replaces InFlight: the least global step a step
	// still running began at (Session.OldestInFlight), read as each save
	// begins, from which the next increment takes the rows changed.
	Oldest func() int64
	// Last, when set, returns the global step the run ends at, 0 for not
	// known (Session.LastStep): End saves a full checkpoint there, so an
	// increment due at that step is not saved as well.
	Last func() int64
}

// A CheckpointSaverHook saves a model's checkpoints as TensorFlow's
// CheckpointSaverHook does: after a step, when the global step has moved
// on by Steps or Secs have passed since the last save, and once more at
// the end. Safe for concurrent use: a worker that finds another saving
// goes on training, as only TensorFlow's chief saves.
type CheckpointSaverHook struct {
	m    Checkpointer
	opts SaverOptions
	mu   sync.Mutex // held while saving
	// lastStep and lastAt are the last save's (or the start's).
	lastStep int64
	lastAt   time.Time
	saves    int
	took     time.Duration // the last save's
	incr     incrState
}

// NewCheckpointSaverHook returns the hook that saves m as o says.
func NewCheckpointSaverHook(m Checkpointer, o SaverOptions) *CheckpointSaverHook {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &CheckpointSaverHook{m: m, opts: o}
}

// Begin probes the directory (SaverOptions.Probe), restores the model
// from its newest checkpoint, if any, and counts the intervals from
// there. restored says whether there was one; prefix and step are its.
func (h *CheckpointSaverHook) Begin(ctx context.Context) (restored bool, prefix string, step int64, err error) {
	if h.opts.Probe != nil {
		if err := h.opts.Probe(ctx, h.opts.Dir); err != nil {
			return false, "", 0, err
		}
	}
	step, prefix, err = h.Restore(ctx)
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		h.Restored(h.m.GlobalStep())
		return false, "", 0, nil
	case err != nil:
		return false, "", 0, err
	}
	return true, prefix, step, nil
}

// Restore restores the model from the newest full checkpoint and, when
// the model saves increments, every later increment of it, oldest first,
// and counts the intervals from there; it returns the global step and
// prefix of the last checkpoint applied.
func (h *CheckpointSaverHook) Restore(ctx context.Context) (step int64, prefix string, err error) {
	step, prefix, err = h.m.Restore(ctx, h.opts.Dir)
	if err != nil {
		return 0, "", err
	}
	base, chain := prefix, 0
	if im, ok := h.m.(IncrementalCheckpointer); ok {
		if step, prefix, chain, err = h.applyIncrements(ctx, im, base, step); err != nil {
			return 0, "", err
		}
	}
	h.mu.Lock()
	h.lastStep, h.lastAt = step, h.opts.Now()
	h.incr = incrState{base: base, prev: prefix, prevStep: step, since: step, at: h.lastAt, saves: h.incr.saves, chain: chain}
	h.mu.Unlock()
	return step, prefix, nil
}

// Restored counts the intervals from step, a checkpoint restored.
func (h *CheckpointSaverHook) Restored(step int64) {
	h.mu.Lock()
	h.lastStep, h.lastAt = step, h.opts.Now()
	h.incr.prevStep, h.incr.since, h.incr.at = step, step, h.lastAt
	h.mu.Unlock()
}

// due says whether a save is due at global step step.
func (h *CheckpointSaverHook) due(step int64) bool {
	return (h.opts.Steps > 0 && step >= h.lastStep+h.opts.Steps) ||
		(h.opts.Secs > 0 && h.opts.Now().Sub(h.lastAt) >= time.Duration(h.opts.Secs)*time.Second)
}

// AfterStep saves when a save is due at global step step, unless another
// caller is saving.
func (h *CheckpointSaverHook) AfterStep(ctx context.Context, step int64) error {
	if !h.mu.TryLock() {
		return nil
	}
	defer h.mu.Unlock()
	switch {
	case h.due(step):
		_, err := h.save(ctx, step)
		return err
	case h.incrDue(step) && h.chainFull():
		_, err := h.save(ctx, step)
		return err
	case h.incrDue(step) && !h.final(step):
		return h.saveIncrement(ctx, step)
	}
	return nil
}

// final says whether step is the run's last (SaverOptions.Last), which
// End saves in full.
func (h *CheckpointSaverHook) final(step int64) bool {
	return h.opts.Last != nil && step == h.opts.Last()
}

// save saves the checkpoint of step; h.mu is held.
func (h *CheckpointSaverHook) save(ctx context.Context, step int64) (string, error) {
	start, since := h.opts.Now(), h.oldestInFlight(step)
	prefix, err := h.m.Save(ctx, h.opts.Dir, step, h.opts.Keep)
	if err != nil {
		return "", err
	}
	h.lastStep, h.lastAt, h.took = step, h.opts.Now(), h.opts.Now().Sub(start)
	h.saves++
	h.incr = incrState{base: prefix, prev: prefix, prevStep: step, since: since, at: h.lastAt, saves: h.incr.saves}
	if h.incrementing() {
		if err := checkpoint.PruneIncrements(h.opts.Dir); err != nil {
			return "", err
		}
	}
	return prefix, nil
}

// End saves the final model unless its global step is saved already, and
// returns the global step saved.
func (h *CheckpointSaverHook) End(ctx context.Context) (step int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	step = h.m.GlobalStep()
	if step != h.lastStep {
		if _, err := h.save(ctx, step); err != nil {
			return step, err
		}
	}
	return step, nil
}

// Saves returns how many checkpoints the hook saved, and how long the
// last save took.
func (h *CheckpointSaverHook) Saves() (n int, last time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.saves, h.took
}
