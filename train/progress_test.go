package train

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/driver/drivertest"
)

// TestProgressHookEvery: a hook reporting every 330ms of a run whose
// steps take 100ms each (fake time) reports six intervals, each with
// the steps done in it, their mean loss, and how far the run is; a
// report before any step has no loss.
func TestProgressHookEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		d := driver.New("progress-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1))
		s, m := newFakeSession(d, 1, 1, 20)
		m.pace = 100 * time.Millisecond
		var reports []Progress
		h := NewProgressHook(s, ProgressOptions{Every: 330 * time.Millisecond}, func(p Progress) { reports = append(reports, p) })
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		h.Begin()
		h.Report()
		if len(reports) != 1 || !math.IsNaN(reports[0].Loss) || reports[0].DoneInInterval != 0 || reports[0].Interval != 0 {
			t.Fatalf("report before the steps: %+v, want no steps and no loss", reports)
		}
		reports = nil
		rctx, stop := context.WithCancel(ctx)
		reported := make(chan struct{})
		go func() {
			defer close(reported)
			h.Run(rctx)
		}()
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		stop()
		<-reported
		// Step n is done at n*100ms, never at a tick: by 330ms 3 are, by
		// 660ms 6, ...
		want := []int64{3, 6, 9, 13, 16, 19}
		if len(reports) != len(want) {
			t.Fatalf("%d reports, want %d: %+v", len(reports), len(want), reports)
		}
		var prev int64
		for i, p := range reports {
			at := time.Duration(i+1) * 330 * time.Millisecond
			if p.Elapsed != at || p.Interval != 330*time.Millisecond || p.Done != want[i] || p.DoneInInterval != want[i]-prev ||
				p.Steps != want[i] || p.GlobalStep != want[i] || p.Loss != 0.5 || p.Waiting != "" {
				t.Errorf("report %d: %+v, want at %v %d done (%d in the interval), loss 0.5", i, p, at, want[i], want[i]-prev)
			}
			if got, want := p.PerSec(p.DoneInInterval), float64(want[i]-prev)/0.33; math.Abs(got-want) > 1e-9 {
				t.Errorf("report %d: %.3f steps/s, want %.3f", i, got, want)
			}
			prev = want[i]
		}
	})
}

// TestProgressHookSteps: a hook reporting every 5 global steps, called
// after each step, reports at global steps 5, 10, 15 and 20, counting
// on from the global step it began at.
func TestProgressHookSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		d := driver.New("progress-steps-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1))
		s, _ := newFakeSession(d, 1, 1, 20)
		var reports []Progress
		h := NewProgressHook(s, ProgressOptions{Steps: 5}, func(p Progress) { reports = append(reports, p) })
		s.AfterStep(h.AfterStep)
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		s.SetGlobalStep(100) // as restored from a checkpoint
		h.Begin()
		// Run returns at once: no time-based reports.
		h.Run(ctx)
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if len(reports) != 4 {
			t.Fatalf("%d reports, want 4: %+v", len(reports), reports)
		}
		for i, p := range reports {
			n := int64(5 * (i + 1))
			if p.GlobalStep != 100+n || p.Steps != n || p.Done != n || p.DoneInInterval != 5 || p.Loss != 0.5 {
				t.Errorf("report %d: %+v, want global step %d, %d steps done, 5 in the interval", i, p, 100+n, n)
			}
		}
	})
}
