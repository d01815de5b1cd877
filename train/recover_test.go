package train

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/driver/drivertest"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestRecoverTimeout: a ps that never answers again fails the run after
// the timeout, naming it and the address tried.
func TestRecoverTimeout(t *testing.T) {
	s := NewSession(driver.New("s"), nil, Options{PS: 1, Workers: 1})
	s.rec = &recovery{opts: RecoverOptions{Timeout: 50 * time.Millisecond, Every: 10 * time.Millisecond, Rejoin: never{}}}
	start := time.Now()
	err := s.await(context.Background(), "/job:ps/replica:0/task:0", start.Add(50*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "/job:ps/replica:0/task:0 lost and not back after ") || !strings.Contains(err.Error(), "(tried 127.0.0.1:1): refused") {
		t.Fatalf("await: %v, want the task, the address tried and the last error", err)
	}
	if !errors.Is(err, errRefused) {
		t.Errorf("await: %v does not wrap the last error", err)
	}
}

var errRefused = errors.New("refused")

type never struct{}

func (never) Find(context.Context, string) (string, error) { return "127.0.0.1:1", errRefused }
func (never) ServerDef() *tfpb.ServerDef                   { return nil }

// TestRejoinFindsOnlyLostWorkers: rejoin looks for a lost worker while the
// steps run, and a recovery from a lost ps, which revives the workers
// that answer, may run meanwhile. Had the recovery revived the worker
// between rejoin's check that it is lost and rejoin's Find, Find would
// replace, and close, the Caller that the rebuilt graphs and the steps
// then use: their calls in flight fail with "client closed". rejoin's
// Find here waits, in the middle, for the recovery to run as far as it
// can.
func TestRejoinFindsOnlyLostWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &drivertest.Cluster{}
		ps, w1 := c.Task("/job:ps/replica:0/task:0", 1), c.Task(WorkerTask(1), 1)
		d := driver.New("rejoin-test", ps, c.Task(WorkerTask(0), 1), w1)
		d.Watch(2 * time.Second)
		job, _ := newFakeSession(d, 1, 2, 12)
		rj := &holdingRejoiner{c: c, d: d, entered: make(chan struct{}), release: make(chan struct{})}
		job.RecoverTasks(RecoverOptions{Rejoin: rj, Every: 100 * time.Millisecond})
		ctx := t.Context()
		if err := job.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		defer job.Close(ctx)
		w1.Kill()
		if err := d.Probe(ctx, w1.Task()); err == nil {
			t.Fatal("the dead worker answers a probe")
		}
		done, rejoined := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(rejoined)
			job.rejoin(ctx, done)
		}()
		<-rj.entered
		// The ps is lost: a recovery starts, as from a step that met the
		// loss, and runs until it ends or waits for rejoin's Find.
		ps.Kill()
		perr := d.Probe(ctx, ps.Task())
		if perr == nil {
			t.Fatal("the dead ps answers a probe")
		}
		recovered := make(chan error, 1)
		go func() { recovered <- job.recoverFrom(ctx, 0, perr) }()
		synctest.Wait()
		close(rj.release)
		if err := <-recovered; err != nil {
			t.Fatalf("recover: %v", err)
		}
		close(done)
		<-rejoined
		rj.mu.Lock()
		defer rj.mu.Unlock()
		if rj.psFinds != 1 || rj.workerFinds < 2 {
			t.Fatalf("the ps found %d times, the worker %d times: want once, and by rejoin and the recovery", rj.psFinds, rj.workerFinds)
		}
		if rj.live > 0 {
			t.Errorf("Find replaced, and closed, the Caller of a worker already revived %d times", rj.live)
		}
		if job.rec.err != nil || d.Lost(w1.Task()) != nil {
			t.Errorf("after the recovery and rejoin: %v, worker lost: %v", job.rec.err, d.Lost(w1.Task()))
		}
	})
}

// holdingRejoiner finds the ps restarted (a new incarnation) and a worker
// as it was (same incarnation, a new connection). Its first Find of a
// worker, rejoin's, closes entered and waits for release.
type holdingRejoiner struct {
	c                *drivertest.Cluster
	d                *driver.Driver
	entered, release chan struct{}

	mu                   sync.Mutex
	psFinds, workerFinds int
	live                 int // Finds of a task not lost
}

func (r *holdingRejoiner) Find(_ context.Context, task string) (string, error) {
	worker := strings.HasPrefix(task, "/job:worker/")
	r.mu.Lock()
	if worker {
		r.workerFinds++
	} else {
		r.psFinds++
	}
	first := worker && r.workerFinds == 1
	r.mu.Unlock()
	if first {
		close(r.entered)
		<-r.release
	}
	old, err := r.d.Caller(task)
	if err != nil {
		return "", err
	}
	inc := old.(*drivertest.Task).Incarnation()
	if !worker {
		inc++
	}
	if r.d.Lost(task) == nil {
		r.mu.Lock()
		r.live++
		r.mu.Unlock()
	}
	return "fake:" + task, r.d.Replace(r.c.Task(task, inc))
}

func (r *holdingRejoiner) ServerDef() *tfpb.ServerDef { return nil }

// TestShortCause: a step's error names the lost task and why, with the
// context around it, without the failed call's own error; other errors
// are kept whole.
func TestShortCause(t *testing.T) {
	lost := &driver.StepError{
		Lost: &driver.TaskError{Task: "/job:ps/replica:0/task:0", Err: errors.New("connection refused")},
		Err:  errors.New("rpc: client closed"),
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("initialize the table: %w", lost), "initialize the table: /job:ps/replica:0/task:0 lost: connection refused"},
		{lost, "/job:ps/replica:0/task:0 lost: connection refused"},
		{errors.New("aborted: no session"), "aborted: no session"},
	} {
		if got := shortCause(c.err); got != c.want {
			t.Errorf("shortCause(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
