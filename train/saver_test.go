package train

import (
	"context"
	"testing"
	"time"
)

// TestSaverDue: a save is due once the global step has moved on by
// Steps, or Secs have passed, and never by a setting of 0.
func TestSaverDue(t *testing.T) {
	start := time.Unix(1000, 0)
	for _, c := range []struct {
		steps   int64
		secs    int
		step    int64
		elapsed time.Duration
		due     bool
	}{
		{100, 0, 199, time.Hour, false},
		{100, 0, 200, 0, true},
		{0, 60, 10000, 59 * time.Second, false},
		{0, 60, 101, time.Minute, true},
		{100, 60, 150, time.Minute, true},
		{100, 60, 150, time.Second, false},
		{0, 0, 1 << 40, 1000 * time.Hour, false},
	} {
		now := start.Add(c.elapsed)
		h := NewCheckpointSaverHook(nil, SaverOptions{Steps: c.steps, Secs: c.secs, Now: func() time.Time { return now }})
		h.lastStep, h.lastAt = 100, start
		if got := h.due(c.step); got != c.due {
			t.Errorf("every %d steps / %ds, last at step 100: due at step %d after %v = %v, want %v", c.steps, c.secs, c.step, c.elapsed, got, c.due)
		}
	}
}

// fakeCheckpointer counts saves at the global step it is set to.
type fakeCheckpointer struct {
	step  int64
	saved []int64
}

func (m *fakeCheckpointer) Save(_ context.Context, dir string, step int64, _ int) (string, error) {
	m.saved = append(m.saved, step)
	return dir + "/model.ckpt", nil
}
func (m *fakeCheckpointer) Restore(context.Context, string) (int64, string, error) {
	return 0, "", errNone
}
func (m *fakeCheckpointer) GlobalStep() int64 { return m.step }

// TestSaverSavesOnceAtEachDueStep: saves follow the step interval, a
// step saved is not saved again at the end, and one not saved is.
func TestSaverSavesOnceAtEachDueStep(t *testing.T) {
	ctx := context.Background()
	m := &fakeCheckpointer{}
	h := NewCheckpointSaverHook(m, SaverOptions{Dir: "/ckpt", Steps: 10})
	if _, _, _, err := h.Begin(ctx); err == nil {
		t.Fatal("Begin hid the model's restore error")
	}
	h.Restored(0)
	for m.step = 1; m.step <= 25; m.step++ {
		if err := h.AfterStep(ctx, m.step); err != nil {
			t.Fatal(err)
		}
	}
	m.step = 25
	if step, err := h.End(ctx); err != nil || step != 25 {
		t.Fatalf("End: step %d, %v; want 25", step, err)
	}
	if step, err := h.End(ctx); err != nil || step != 25 {
		t.Fatalf("second End: step %d, %v; want 25", step, err)
	}
	if n, _ := h.Saves(); n != 3 || len(m.saved) != 3 || m.saved[0] != 10 || m.saved[1] != 20 || m.saved[2] != 25 {
		t.Fatalf("saved %v (%d counted), want steps 10, 20, 25", m.saved, n)
	}
}

var errNone = errorString("restore failed")

type errorString string

func (e errorString) Error() string { return string(e) }
