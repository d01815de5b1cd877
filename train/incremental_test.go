package train

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// fakeIncremental saves full checkpoints and increments as bundles of
// their global step, and records what it was asked.
type fakeIncremental struct {
	t     *testing.T
	step  int64
	calls []string // "full 30", "incr 40 since 28 base model.ckpt-30 prev model.ckpt-30", "apply ..."
}

func (m *fakeIncremental) write(prefix string, step int64) {
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		m.t.Fatal(err)
	}
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err == nil {
		err = w.Add("global_step", &wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes([]int64{step})})
	}
	if err == nil {
		err = w.Finish()
	}
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *fakeIncremental) Save(_ context.Context, dir string, step int64, keep int) (string, error) {
	prefix := filepath.Join(dir, "model.ckpt-"+strconv.FormatInt(step, 10))
	m.write(prefix, step)
	m.calls = append(m.calls, fmt.Sprint("full ", step))
	return prefix, checkpoint.Keep(dir, prefix, keep)
}

func (m *fakeIncremental) Restore(_ context.Context, dir string) (int64, string, error) {
	p, err := checkpoint.Latest(dir)
	if err != nil {
		return 0, "", err
	}
	step, _ := strconv.ParseInt(p[strings.LastIndexByte(p, '-')+1:], 10, 64)
	m.step = step
	return step, p, nil
}

func (m *fakeIncremental) GlobalStep() int64 { return m.step }

func (m *fakeIncremental) SaveIncrement(_ context.Context, prefix string, step, since int64, base, prev string) error {
	m.write(prefix, step)
	m.calls = append(m.calls, fmt.Sprintf("incr %d since %d base %s prev %s", step, since, base, prev))
	return nil
}

func (m *fakeIncremental) ApplyIncrement(_ context.Context, prefix string) (int64, error) {
	step, _ := strconv.ParseInt(prefix[strings.LastIndexByte(prefix, '-')+1:], 10, 64)
	m.calls = append(m.calls, "apply "+filepath.Base(prefix))
	m.step = step
	return step, nil
}

// TestSaverIncrements: increments are saved between full checkpoints
// once one exists, each since the last save's step less InFlight and
// naming its base and the save before it; a full checkpoint starts a new
// chain and deletes the increments of the ones it drops; a restore
// applies the newest full checkpoint's increments, oldest first.
func TestSaverIncrements(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := &fakeIncremental{t: t}
	opts := SaverOptions{Dir: dir, Steps: 30, IncrSteps: 10, InFlight: 2, Keep: 1}
	h := NewCheckpointSaverHook(m, opts)
	if restored, _, _, err := h.Begin(ctx); err != nil || restored {
		t.Fatalf("begin: %v, %v", restored, err)
	}
	for _, step := range []int64{10, 20, 30, 35, 40, 50, 60, 70, 75} {
		m.step = step
		if err := h.AfterStep(ctx, step); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"full 30", "incr 40 since 28 base model.ckpt-30 prev model.ckpt-30",
		"incr 50 since 38 base model.ckpt-30 prev incr-model.ckpt-40", "full 60", "incr 70 since 58 base model.ckpt-60 prev model.ckpt-60"}
	if !slices.Equal(m.calls, want) {
		t.Fatalf("saves:\n%s\nwant:\n%s", strings.Join(m.calls, "\n"), strings.Join(want, "\n"))
	}
	if n := h.Increments(); n != 3 {
		t.Errorf("Increments() = %d, want 3", n)
	}
	if _, err := os.Stat(checkpoint.IncrementsDir(dir, "model.ckpt-30")); !os.IsNotExist(err) {
		t.Errorf("the increments of model.ckpt-30, dropped by --keep 1, are there: %v", err)
	}

	r := &fakeIncremental{t: t}
	restored, prefix, step, err := NewCheckpointSaverHook(r, opts).Begin(ctx)
	if err != nil || !restored || step != 70 || filepath.Base(prefix) != "incr-model.ckpt-70" {
		t.Fatalf("restore: %v %s at %d, %v; want incr-model.ckpt-70 at 70", restored, prefix, step, err)
	}
	if want := []string{"apply incr-model.ckpt-70"}; !slices.Equal(r.calls, want) {
		t.Fatalf("restore applied %v, want %v", r.calls, want)
	}
}

// TestSaverIncrementsSinceOldestInFlight: with SaverOptions.Oldest, an
// increment takes the rows changed since the oldest step in flight when
// the save before it began, however far that step lags.
func TestSaverIncrementsSinceOldestInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := &fakeIncremental{t: t}
	var oldest int64
	opts := SaverOptions{Dir: dir, Steps: 30, IncrSteps: 10, InFlight: 2, Keep: 1,
		Oldest: func() int64 { return oldest }}
	h := NewCheckpointSaverHook(m, opts)
	if restored, _, _, err := h.Begin(ctx); err != nil || restored {
		t.Fatalf("begin: %v, %v", restored, err)
	}
	// A step begun at 12 still runs at the full save of 30, one begun at
	// 39 at the increment of 40; then none lags.
	for _, s := range []struct{ step, oldest int64 }{{10, 10}, {20, 20}, {30, 12}, {40, 39}, {50, 50}} {
		m.step, oldest = s.step, s.oldest
		if err := h.AfterStep(ctx, s.step); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"full 30", "incr 40 since 12 base model.ckpt-30 prev model.ckpt-30",
		"incr 50 since 39 base model.ckpt-30 prev incr-model.ckpt-40"}
	if !slices.Equal(m.calls, want) {
		t.Fatalf("saves:\n%s\nwant:\n%s", strings.Join(m.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestSaverMaxIncrements: once a full checkpoint has MaxIncrements
// increments, the next save due is a full one, which starts a new
// chain; a restore applies the newest full checkpoint's increments and
// counts them against the bound.
func TestSaverMaxIncrements(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := &fakeIncremental{t: t}
	opts := SaverOptions{Dir: dir, Steps: 100, IncrSteps: 10, MaxIncrements: 2}
	h := NewCheckpointSaverHook(m, opts)
	if restored, _, _, err := h.Begin(ctx); err != nil || restored {
		t.Fatalf("begin: %v, %v", restored, err)
	}
	run := func(h *CheckpointSaverHook, m *fakeIncremental, steps ...int64) {
		for _, step := range steps {
			m.step = step
			if err := h.AfterStep(ctx, step); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(h, m, 100, 110, 120, 130, 140)
	want := []string{"full 100", "incr 110 since 100 base model.ckpt-100 prev model.ckpt-100",
		"incr 120 since 110 base model.ckpt-100 prev incr-model.ckpt-110", "full 130",
		"incr 140 since 130 base model.ckpt-130 prev model.ckpt-130"}
	if !slices.Equal(m.calls, want) {
		t.Fatalf("saves:\n%s\nwant:\n%s", strings.Join(m.calls, "\n"), strings.Join(want, "\n"))
	}

	r := &fakeIncremental{t: t}
	hr := NewCheckpointSaverHook(r, opts)
	restored, prefix, step, err := hr.Begin(ctx)
	if err != nil || !restored || step != 140 || filepath.Base(prefix) != "incr-model.ckpt-140" {
		t.Fatalf("restore: %v %s at %d, %v; want incr-model.ckpt-140 at 140", restored, prefix, step, err)
	}
	run(hr, r, 150, 160)
	want = []string{"apply incr-model.ckpt-140", "incr 150 since 140 base model.ckpt-130 prev incr-model.ckpt-140", "full 160"}
	if !slices.Equal(r.calls, want) {
		t.Fatalf("after the restore:\n%s\nwant:\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}
}

// TestSaverOneSaveAtTheLastStep: at the run's last step (SaverOptions.Last)
// an increment due is not saved, as End saves that step in full; a full
// save due there is not followed by another at End, nor by an increment;
// before the last step increments are saved as ever.
func TestSaverOneSaveAtTheLastStep(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		steps int64 // SaverOptions.Steps
		want  []string
	}{
		{"increment due", 100, []string{"full 10", "incr 20 since 10 base model.ckpt-10 prev model.ckpt-10", "full 30"}},
		{"full due", 15, []string{"full 10", "incr 20 since 10 base model.ckpt-10 prev model.ckpt-10", "full 30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &fakeIncremental{t: t}
			h := NewCheckpointSaverHook(m, SaverOptions{Dir: t.TempDir(), Steps: tc.steps, IncrSteps: 10,
				Last: func() int64 { return 30 }})
			if restored, _, _, err := h.Begin(ctx); err != nil || restored {
				t.Fatalf("begin: %v, %v", restored, err)
			}
			m.step = 10
			if err := h.Increment(ctx); err == nil {
				t.Fatal("an increment with no full checkpoint to build on was saved")
			}
			if _, err := h.End(ctx); err != nil { // the first full checkpoint
				t.Fatal(err)
			}
			for _, step := range []int64{20, 30} {
				m.step = step
				if err := h.AfterStep(ctx, step); err != nil {
					t.Fatal(err)
				}
			}
			if step, err := h.End(ctx); err != nil || step != 30 {
				t.Fatalf("End: step %d, %v", step, err)
			}
			if err := h.Increment(ctx); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.calls, tc.want) {
				t.Fatalf("saves:\n%s\nwant one save a step:\n%s", strings.Join(m.calls, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
