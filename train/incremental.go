package train

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
)

// An IncrementalCheckpointer is a Checkpointer that saves, between full
// checkpoints, increments: the embedding rows changed since a version,
// and the dense variables in full (the ps's IncrSave). A
// CheckpointSaverHook with SaverOptions.IncrSteps or IncrSecs saves them
// where package checkpoint keeps them (checkpoint.IncrementsDir), and
// restores the newest full checkpoint and then each of its increments.
type IncrementalCheckpointer interface {
	Checkpointer
	// SaveIncrement saves into prefix the rows changed since version
	// since, as of globalStep, as an increment of the full checkpoint
	// base that follows prev (base or the increment before it).
	SaveIncrement(ctx context.Context, prefix string, globalStep, since int64, base, prev string) error
	// ApplyIncrement applies the increment under prefix to the model as
	// restored, and returns its global step.
	ApplyIncrement(ctx context.Context, prefix string) (globalStep int64, err error)
}

// incrState is where a hook's increments stand.
type incrState struct {
	base, prev string // prefixes of the full checkpoint and the last save
	prevStep   int64  // the last save's global step, of either kind
	// since is the version the next increment saves the rows changed
	// from: the oldest step in flight when the last save began.
	since int64
	at    time.Time // and when
	saves int       // increments saved
	chain int       // increments of base
}

// chainFull says whether base has SaverOptions.MaxIncrements increments,
// so that the next save is a full one; h.mu is held.
func (h *CheckpointSaverHook) chainFull() bool {
	return h.opts.MaxIncrements > 0 && h.incr.chain >= h.opts.MaxIncrements
}

// incrementing says whether the hook saves increments.
func (h *CheckpointSaverHook) incrementing() bool {
	_, ok := h.m.(IncrementalCheckpointer)
	return ok && (h.opts.IncrSteps > 0 || h.opts.IncrSecs > 0)
}

// incrDue says whether an increment is due at global step step; h.mu is
// held.
func (h *CheckpointSaverHook) incrDue(step int64) bool {
	if !h.incrementing() || h.incr.base == "" || step <= h.incr.prevStep {
		return false
	}
	return (h.opts.IncrSteps > 0 && step >= h.incr.prevStep+h.opts.IncrSteps) ||
		(h.opts.IncrSecs > 0 && h.opts.Now().Sub(h.incr.at) >= time.Duration(h.opts.IncrSecs)*time.Second)
}

// oldestInFlight is the least global step a step still running at a save
// of step may have read: SaverOptions.Oldest's, or step less InFlight.
func (h *CheckpointSaverHook) oldestInFlight(step int64) int64 {
	if h.opts.Oldest != nil {
		return max(0, min(h.opts.Oldest(), step))
	}
	return max(0, step-h.opts.InFlight)
}

// saveIncrement saves the increment of step and records it; h.mu is
// held.
func (h *CheckpointSaverHook) saveIncrement(ctx context.Context, step int64) error {
	im := h.m.(IncrementalCheckpointer)
	prefix := filepath.Join(checkpoint.IncrementsDir(h.opts.Dir, h.incr.base), checkpoint.IncrementBasename+"-"+strconv.FormatInt(step, 10))
	next := h.oldestInFlight(step)
	if err := im.SaveIncrement(ctx, prefix, step, h.incr.since, filepath.Base(h.incr.base), filepath.Base(h.incr.prev)); err != nil {
		return err
	}
	if err := checkpoint.AddIncrement(h.opts.Dir, h.incr.base, prefix); err != nil {
		return fmt.Errorf("save increment %s: %w", prefix, err)
	}
	h.incr.prev, h.incr.prevStep, h.incr.since, h.incr.at = prefix, step, next, h.opts.Now()
	h.incr.saves++
	h.incr.chain++
	return nil
}

// applyIncrements applies the increments of base, restored at global
// step step, and returns the last one's global step and prefix (base's
// when it has none) and how many it applied.
func (h *CheckpointSaverHook) applyIncrements(ctx context.Context, im IncrementalCheckpointer, base string, step int64) (int64, string, int, error) {
	incrs, err := checkpoint.Increments(h.opts.Dir, base)
	if err != nil {
		return 0, "", 0, fmt.Errorf("restore increments of %s: %w", base, err)
	}
	prefix := base
	for _, p := range incrs {
		s, err := im.ApplyIncrement(ctx, p)
		if err != nil {
			return 0, "", 0, err
		}
		if s <= step {
			return 0, "", 0, fmt.Errorf("restore increment %s: global step %d, not after %d: %w", p, s, step, checkpoint.ErrMismatch)
		}
		step, prefix = s, p
	}
	return step, prefix, len(incrs), nil
}

// Increments returns how many increments the hook saved.
func (h *CheckpointSaverHook) Increments() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.incr.saves
}

// Increment saves an increment of the model as of its global step now,
// after a full checkpoint saved or restored; it saves nothing when that
// step is saved already. Asked for, it saves one past
// SaverOptions.MaxIncrements too, which bounds the saves AfterStep makes.
func (h *CheckpointSaverHook) Increment(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m.(IncrementalCheckpointer); !ok || h.incr.base == "" {
		return fmt.Errorf("save increment: %w: no full checkpoint to build on", checkpoint.ErrNoCheckpoint)
	}
	if step := h.m.GlobalStep(); step > h.incr.prevStep {
		return h.saveIncrement(ctx, step)
	}
	return nil
}
