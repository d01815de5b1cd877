package train

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/driver/drivertest"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestSessionFailsOverLostWorker: with FailOverWorkers, a worker lost in
// the middle of the run costs the step in flight; its replica's other
// steps run on the worker left, and the run ends.
func TestSessionFailsOverLostWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		w1 := c.Task(WorkerTask(1), 1)
		d := driver.New("failover-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1), w1)
		d.Watch(2 * time.Second)
		s, _ := newFakeSession(d, 1, 2, 10)
		s.FailOverWorkers()
		s.AfterStep(func(_ context.Context, step int64) error {
			if step == 4 {
				c.KillNext(w1)
			}
			return nil
		})
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.Run(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		done, lost := s.Steps()
		if lost != 1 || done != 19 || s.GlobalStep() != 19 {
			t.Errorf("steps %d, lost %d, global step %d: want 19, 1 and 19", done, lost, s.GlobalStep())
		}
		if n := len(s.Losses(0)); n != 19 {
			t.Errorf("%d losses, want one per step done, 19", n)
		}
	})
}

// TestSessionRecoversLostPS: with RecoverTasks, a parameter server lost
// and found again restarted (a new incarnation) has the session build
// the model again, initialize it, restore it and go on from the global
// step restored, counting the steps undone.
func TestSessionRecoversLostPS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		ps := c.Task("/job:ps/replica:0/task:0", 1)
		d := driver.New("recover-test", ps, c.Task(WorkerTask(0), 1))
		d.Watch(2 * time.Second)
		s, m := newFakeSession(d, 1, 1, 12)
		var restores atomic.Int32
		s.RecoverTasks(RecoverOptions{
			Rejoin: &restarting{c: c, d: d},
			Every:  100 * time.Millisecond,
			Restore: func(context.Context) (int64, error) {
				restores.Add(1)
				return 2, nil
			},
		})
		s.AfterStep(func(_ context.Context, step int64) error {
			if step == 5 && restores.Load() == 0 {
				c.KillNext(ps)
			}
			return nil
		})
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.Run(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		done, lost := s.Steps()
		if restores.Load() != 1 || m.builds.Load() != 2 || m.inits.Load() != 2 {
			t.Fatalf("restored %d times, built %d, initialized %d: want 1, 2 and 2", restores.Load(), m.builds.Load(), m.inits.Load())
		}
		if lost != 1 || done != 11 {
			t.Errorf("steps %d, lost %d: want 11 and 1", done, lost)
		}
		// Restored to 2 after step 5: 3 undone, 6 more done since.
		if s.UndoneSteps() != 3 || s.GlobalStep() != 2+6 {
			t.Errorf("undone %d, global step %d: want 3 and 8", s.UndoneSteps(), s.GlobalStep())
		}
	})
}

// restarting finds a lost task restarted: a new incarnation.
type restarting struct {
	c *drivertest.Cluster
	d *driver.Driver
}

func (r *restarting) Find(_ context.Context, task string) (string, error) {
	old, err := r.d.Caller(task)
	if err != nil {
		return "", err
	}
	return "fake:" + task, r.d.Replace(r.c.Task(task, old.(*drivertest.Task).Incarnation()+1))
}

func (r *restarting) ServerDef() *tfpb.ServerDef { return nil }

// TestSessionStopsAtStep: under StopAtStep, a run whose parameter server
// is lost and restored to an older global step trains the steps undone
// and the step lost again, and ends at exactly the step asked for, with
// two replicas taking steps as they go.
func TestSessionStopsAtStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		ps := c.Task("/job:ps/replica:0/task:0", 1)
		d := driver.New("stop-test", ps, c.Task(WorkerTask(0), 1), c.Task(WorkerTask(1), 1))
		d.Watch(2 * time.Second)
		s, _ := newFakeSession(d, 1, 2, 1)
		var restores atomic.Int32
		s.RecoverTasks(RecoverOptions{
			Rejoin: &restarting{c: c, d: d},
			Every:  100 * time.Millisecond,
			Restore: func(context.Context) (int64, error) {
				restores.Add(1)
				return 2, nil
			},
		})
		s.AfterStep(func(_ context.Context, step int64) error {
			if step == 7 && restores.Load() == 0 {
				c.KillNext(ps)
			}
			return nil
		})
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		s.SetGlobalStep(3) // as a checkpoint restored before the run
		s.StopAtStep(3 + 20)
		if err := s.Run(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		done, lost := s.Steps()
		if restores.Load() != 1 || lost < 1 {
			t.Fatalf("restored %d times, %d steps lost: want 1 and some", restores.Load(), lost)
		}
		if s.GlobalStep() != 23 || s.UndoneSteps() < 5 || done != 20+s.UndoneSteps() {
			t.Errorf("global step %d, steps %d, undone %d: want 23, and 20 plus those undone (at least 5)", s.GlobalStep(), done, s.UndoneSteps())
		}
	})
}

// TestSessionStartsWithoutMissingWorker: under RecoverTasks a worker that
// does not answer at the start is one lost: the run starts with the
// other, and the missing worker joins once it answers, its graphs built,
// and runs its replica's steps again.
func TestSessionStartsWithoutMissingWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		w1 := c.Task(WorkerTask(1), 1)
		w1.Kill()
		d := driver.New("late-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1), w1)
		d.Watch(2 * time.Second)
		s, m := newFakeSession(d, 1, 2, 1)
		late := &lateWorker{c: c, d: d, task: w1.Task()}
		var logs []string
		var mu sync.Mutex
		s.RecoverTasks(RecoverOptions{Rejoin: late, Every: 100 * time.Millisecond, Log: func(msg string) {
			mu.Lock()
			logs = append(logs, msg)
			mu.Unlock()
		}})
		s.StopAtStep(200)
		var joinedAt atomic.Int64
		s.AfterStep(func(_ context.Context, step int64) error {
			if step == 20 {
				late.up.Store(true)
			}
			if joinedAt.Load() == 0 && m.worker[1].Handle != "" {
				joinedAt.Store(step)
			}
			return nil
		})
		m.pace = 10 * time.Millisecond // so that the rejoin finds steps to run
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatalf("setup with a worker missing: %v", err)
		}
		defer s.Close(ctx)
		if m.worker[1].Handle != "" {
			t.Fatal("the missing worker got graphs at the start")
		}
		if err := s.Run(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		mu.Lock()
		log := strings.Join(logs, "\n")
		mu.Unlock()
		if !strings.Contains(log, w1.Task()+" answers again: it rejoins") || joinedAt.Load() == 0 || s.GlobalStep() != 200 {
			t.Errorf("joined at step %d, global step %d: want the worker to join and the run to end at 200\nrecovery: %s", joinedAt.Load(), s.GlobalStep(), log)
		}
		if d.Lost(w1.Task()) != nil {
			t.Errorf("the late worker is still lost: %v", d.Lost(w1.Task()))
		}
	})
}

// lateWorker finds task once up is set: a task started late.
type lateWorker struct {
	c    *drivertest.Cluster
	d    *driver.Driver
	task string
	up   atomic.Bool
}

func (r *lateWorker) Find(_ context.Context, task string) (string, error) {
	if task != r.task || !r.up.Load() {
		return "fake:" + task, errors.New("connection refused")
	}
	return "fake:" + task, r.d.Replace(r.c.Task(task, 2))
}

func (r *lateWorker) ServerDef() *tfpb.ServerDef { return nil }

// TestSessionStopAtStepEvenSteps: an unbroken run under StopAtStep gives
// every replica its own Options.Steps, however fast each goes.
func TestSessionStopAtStepEvenSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		d := driver.New("even-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1), c.Task(WorkerTask(1), 1))
		s, m := newFakeSession(d, 1, 2, 50)
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		s.StopAtStep(100)
		if err := s.Run(ctx); err != nil {
			t.Fatal(err)
		}
		if a, b := m.ran[0].Load(), m.ran[1].Load(); a != 50 || b != 50 || s.GlobalStep() != 100 {
			t.Errorf("replicas ran %d and %d steps to global step %d: want 50 each, to 100", a, b, s.GlobalStep())
		}
	})
}

// TestSessionRecoversPSRestartedFasterThanProbe: a parameter server that
// restarts in the middle of a step and answers again at once, a new
// incarnation behind the same Caller, fails the step with the broken
// connection's Unavailable while the probe of the step's tasks already
// answers. The session expects each task's incarnation: the probe finds
// it changed, the ps restarted, and the session recovers as from a lost
// ps (build, initialize, restore) where the run failed with Unavailable.
func TestSessionRecoversPSRestartedFasterThanProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		ps := c.Task("/job:ps/replica:0/task:0", 1)
		d := driver.New("fast-restart-test", ps, c.Task(WorkerTask(0), 1))
		d.Watch(2 * time.Second)
		s, m := newFakeSession(d, 1, 1, 12)
		s.StopAtStep(12)
		var restores atomic.Int32
		var logs []string
		s.RecoverTasks(RecoverOptions{
			Rejoin: answering{d},
			Every:  100 * time.Millisecond,
			Restore: func(context.Context) (int64, error) {
				restores.Add(1)
				return 2, nil
			},
			Log: func(msg string) { logs = append(logs, msg) },
		})
		s.AfterStep(func(_ context.Context, step int64) error {
			if step == 5 && restores.Load() == 0 {
				c.RestartNext(ps)
			}
			return nil
		})
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		err := s.Run(ctx)
		log := strings.Join(logs, "\n")
		if err != nil {
			t.Fatalf("run: %v\nrecovery: %s", err, log)
		}
		if ps.Incarnation() != 2 || !strings.Contains(log, ps.Task()+" lost: restarted: incarnation 0x2, was 0x1") {
			t.Fatalf("ps incarnation %d: want the ps restarted once and the recovery to say so\nrecovery: %s", ps.Incarnation(), log)
		}
		if restores.Load() != 1 || m.builds.Load() != 2 || m.inits.Load() != 2 {
			t.Fatalf("restored %d times, built %d, initialized %d: want 1, 2 and 2\nrecovery: %s", restores.Load(), m.builds.Load(), m.inits.Load(), log)
		}
		// Restored to 2 after step 5: 3 undone, trained again to 12.
		if _, lost := s.Steps(); lost != 1 || s.UndoneSteps() != 3 || s.GlobalStep() != 12 {
			t.Errorf("lost %d, undone %d, global step %d: want 1, 3 and 12", lost, s.UndoneSteps(), s.GlobalStep())
		}
	})
}

// answering finds a lost task at its Caller, once it answers.
type answering struct{ d *driver.Driver }

func (a answering) Find(ctx context.Context, task string) (string, error) {
	c, err := a.d.Caller(task)
	if err != nil {
		return "", err
	}
	_, err = c.GetStatus(ctx)
	return "fake:" + task, err
}

func (answering) ServerDef() *tfpb.ServerDef { return nil }

// TestSessionOldestInFlight: while a step of one replica runs, the other's
// steps move the global step on, and OldestInFlight stays at the global
// step the running one began at; once no step runs it is the global step.
func TestSessionOldestInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		d := driver.New("oldest-test", c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(0), 1), c.Task(WorkerTask(1), 1))
		s, m := newFakeSession(d, 1, 2, 6)
		began, release := make(chan struct{}), make(chan struct{})
		var first atomic.Bool
		m.before = func(r int) {
			switch {
			case r == 0 && first.CompareAndSwap(false, true):
				close(began)
				<-release // replica 0's first step, begun at global step 0, lags
			case r == 1:
				<-began
			}
		}
		var seen []int64
		s.AfterStep(func(_ context.Context, step int64) error {
			if step <= 6 { // replica 1's steps while replica 0's first runs
				seen = append(seen, s.OldestInFlight())
			}
			if step == 6 {
				close(release)
			}
			return nil
		})
		ctx := t.Context()
		if err := s.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.Close(ctx)
		if err := s.Run(ctx); err != nil {
			t.Fatalf("run: %v", err)
		}
		if want := []int64{0, 0, 0, 0, 0, 0}; !slices.Equal(seen, want) {
			t.Errorf("OldestInFlight while replica 0's first step ran: %v, want %v", seen, want)
		}
		if got := s.OldestInFlight(); got != s.GlobalStep() || got != 12 {
			t.Errorf("OldestInFlight after the run %d, global step %d: want both 12", got, s.GlobalStep())
		}
	})
}

// TestNewSessionBinds: a Binder has its session from NewSession on, before
// any Setup, so that no caller can set it up unbound.
func TestNewSessionBinds(t *testing.T) {
	m := &fakeModel{}
	s := NewSession(nil, m, Options{PS: 1, Workers: 1, Steps: 1})
	if m.s != s {
		t.Fatalf("the model's session is %p, want the new session %p", m.s, s)
	}
}
