package driver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// fakeTask is a Caller whose calls block until their context ends while
// frozen (a stopped process), fail at once while dead (a reset
// connection), and answer otherwise.
type fakeTask struct {
	name string

	mu       sync.Mutex
	frozen   bool
	dead     bool
	sessions int // CreateWorkerSession calls
	closed   bool
}

func (f *fakeTask) set(frozen, dead bool) {
	f.mu.Lock()
	f.frozen, f.dead = frozen, dead
	f.mu.Unlock()
}

func (f *fakeTask) wait(ctx context.Context) error {
	f.mu.Lock()
	frozen, dead := f.frozen, f.dead
	f.mu.Unlock()
	switch {
	case dead:
		return status.Errorf(wire.Unavailable, "connection reset by peer")
	case frozen:
		<-ctx.Done()
		return status.Errorf(wire.DeadlineExceeded, "%v", ctx.Err())
	}
	return nil
}

func (f *fakeTask) Task() string { return f.name }

// Call carries no peer calls: the fake tasks run no graphs.
func (f *fakeTask) Call(context.Context, rpc.Method, *rpc.Request, *rpc.Reply) error {
	return status.Errorf(wire.Unimplemented, "fake task %s makes no peer calls", f.name)
}
func (f *fakeTask) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	return &tfpb.GetStatusResponse{}, f.wait(ctx)
}
func (f *fakeTask) CreateWorkerSession(context.Context, *tfpb.CreateWorkerSessionRequest) error {
	f.mu.Lock()
	f.sessions++
	f.mu.Unlock()
	return nil
}
func (f *fakeTask) DeleteWorkerSession(context.Context, *tfpb.DeleteWorkerSessionRequest) error {
	return nil
}
func (f *fakeTask) RegisterGraph(context.Context, *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	return &tfpb.RegisterGraphResponse{GraphHandle: "g"}, nil
}
func (f *fakeTask) DeregisterGraph(context.Context, *tfpb.DeregisterGraphRequest) error { return nil }

// RunGraph of a healthy task waits for its peer's tensors, as a
// partition does: it ends when the step's context does.
func (f *fakeTask) RunGraph(ctx context.Context, _ *tfpb.RunGraphRequest, _ []handlers.Feed, _ *handlers.Fetched) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return status.Errorf(wire.Cancelled, "%v", ctx.Err())
}
func (f *fakeTask) CleanupGraph(ctx context.Context, _ *tfpb.CleanupGraphRequest) error {
	return f.wait(ctx)
}
func (f *fakeTask) RecvTensor(ctx context.Context, _ *tfpb.RecvTensorRequest, _ *handlers.Fetched) error {
	return f.wait(ctx)
}
func (f *fakeTask) Stats() handlers.Stats { return handlers.Stats{} }
func (f *fakeTask) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	return nil
}

func (f *fakeTask) counts() (sessions int, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sessions, f.closed
}

// TestLostTaskFailsStep: a step whose task stops answering (frozen) or
// dies fails within the watch's timeout, with the task's *TaskError,
// where it waited for its context before; a revived task runs steps again.
func TestLostTaskFailsStep(t *testing.T) {
	const timeout = 600 * time.Millisecond
	for _, tc := range []struct {
		name   string
		freeze bool
	}{{"frozen", true}, {"dead", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ps := &fakeTask{name: "/job:ps/replica:0/task:0"}
			wk := &fakeTask{name: "/job:worker/replica:0/task:0"}
			d := New("s", ps, wk)
			d.Watch(timeout)
			defer d.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ps.set(tc.freeze, !tc.freeze)
			start := time.Now()
			err := d.RunPartitions(ctx, 1, Partition{Graph: Graph{Task: wk.name, Handle: "g"}}, Partition{Graph: Graph{Task: ps.name, Handle: "g"}})
			took := time.Since(start)
			var te *TaskError
			if !errors.As(err, &te) || te.Task != ps.name || !errors.Is(err, ErrTaskLost) {
				t.Fatalf("step error %v, want the ps's *TaskError", err)
			}
			// Generous for a loaded machine, far below the test's deadline.
			if took > 4*timeout {
				t.Errorf("the step failed after %v, want about %v", took, timeout)
			}
			if d.Lost(ps.name) == nil || d.Lost(wk.name) != nil {
				t.Errorf("lost: ps %v, worker %v; want only the ps", d.Lost(ps.name), d.Lost(wk.name))
			}
			if err := d.CleanupStep(ctx, 1, ps.name); !errors.Is(err, ErrTaskLost) {
				t.Errorf("cleanup on the lost task: %v, want ErrTaskLost", err)
			}
			// Back: the step runs (and ends when its context does).
			ps.set(false, false)
			d.Revive(ps.name)
			sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer scancel()
			err = d.RunPartitions(sctx, 2, Partition{Graph: Graph{Task: ps.name, Handle: "g"}})
			if errors.Is(err, ErrTaskLost) || err == nil {
				t.Errorf("step after revival: %v, want its own context's end", err)
			}
		})
	}
}

// TestRestartedTask: a task that died and came back at another address
// gets a new Caller (the old one closed), a session again while the
// tasks still lost are skipped, and runs steps once revived; a probe that
// began before the revival does not mark it lost again, and its old
// graphs are forgotten.
func TestRestartedTask(t *testing.T) {
	ps := &fakeTask{name: "/job:ps/replica:0/task:0"}
	wk := &fakeTask{name: "/job:worker/replica:0/task:0"}
	d := New("s", ps, wk)
	d.Watch(600 * time.Millisecond)
	defer d.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, err := d.RegisterGraph(ctx, ps.name, &tfpb.GraphDef{})
	if err != nil {
		t.Fatal(err)
	}
	ps.set(false, true)
	if err := d.RunPartitions(ctx, 1, Partition{Graph: old}); !errors.Is(err, ErrTaskLost) {
		t.Fatalf("step on the dead task: %v, want ErrTaskLost", err)
	}
	stale := d.taskHealth(ps.name)
	if err := d.CreateSessions(ctx, nil); err != nil {
		t.Fatalf("sessions while the ps is lost: %v", err)
	}
	if n, _ := ps.counts(); n != 0 {
		t.Errorf("the lost ps was asked for %d sessions, want none", n)
	}
	back := &fakeTask{name: ps.name}
	if err := d.Replace(back); err != nil {
		t.Fatal(err)
	}
	if _, closed := ps.counts(); !closed {
		t.Error("the replaced Caller was not closed")
	}
	if err := d.Replace(&fakeTask{name: "/job:ps/replica:0/task:9"}); !errors.Is(err, ErrUnknownTask) {
		t.Errorf("Replace of a task not the driver's: %v, want ErrUnknownTask", err)
	}
	d.Revive(ps.name)
	if te := d.markLost(ps.name, stale, errors.New("late probe")); te != nil || d.Lost(ps.name) != nil {
		t.Fatalf("a probe from before the revival marked the task lost: %v", d.Lost(ps.name))
	}
	if err := d.CreateSessions(ctx, &tfpb.ServerDef{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := back.counts(); n != 1 {
		t.Errorf("the restarted ps got %d sessions, want 1", n)
	}
	if err := d.Forget(ctx, old); err != nil {
		t.Errorf("forget: %v", err)
	}
	d.mu.Lock()
	left := len(d.graphs)
	d.mu.Unlock()
	if left != 0 {
		t.Errorf("%d graphs left after Forget, want 0", left)
	}
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer scancel()
	if err := d.RunPartitions(sctx, 2, Partition{Graph: Graph{Task: ps.name, Handle: "g"}}); errors.Is(err, ErrTaskLost) || err == nil {
		t.Errorf("step on the restarted task: %v, want its own context's end", err)
	}
}

// cutTask is a fakeTask whose CleanupGraph calls wait until the Caller is
// closed and then fail as a closed client's do.
type cutTask struct {
	*fakeTask
	calls chan struct{} // one value per call in flight
	cut   chan struct{}
	once  sync.Once
}

func newCutTask(name string) *cutTask {
	return &cutTask{fakeTask: &fakeTask{name: name}, calls: make(chan struct{}, 1), cut: make(chan struct{})}
}

func (c *cutTask) CleanupGraph(context.Context, *tfpb.CleanupGraphRequest) error {
	c.calls <- struct{}{}
	<-c.cut
	return status.Errorf(wire.Unavailable, "client closed")
}

func (c *cutTask) Close() error {
	c.once.Do(func() { close(c.cut) })
	return c.fakeTask.Close()
}

// TestCallCutByLossIsTheLoss: a call that fails because its task was lost
// (here its Caller, closed when the restarted task replaced it) fails with
// the task's *TaskError, even when the loss has not reached the call's
// context yet and the task answers again by then. The loss's delivery is
// held back until the call has returned, as a loaded machine may delay
// its goroutine: the step's error was "client closed" then.
func TestCallCutByLossIsTheLoss(t *testing.T) {
	ps := newCutTask("/job:ps/replica:0/task:0")
	wk := &fakeTask{name: "/job:worker/replica:0/task:0"}
	d := New("s", ps, wk)
	release := make(chan struct{})
	defer close(release)
	d.health.afterFunc = func(ctx context.Context, f func()) func() bool {
		return context.AfterFunc(ctx, func() {
			<-release
			f()
		})
	}
	// No periodic probe within the test: its own probe finds the loss.
	d.Watch(time.Hour)
	defer d.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- d.CleanupStep(ctx, 1, ps.name) }()
	<-ps.calls
	ps.set(false, true)
	if err := d.Probe(ctx, ps.name); !errors.Is(err, ErrTaskLost) {
		t.Fatalf("probe of the dead ps: %v, want ErrTaskLost", err)
	}
	if err := d.Replace(&fakeTask{name: ps.name}); err != nil {
		t.Fatal(err)
	}
	d.Revive(ps.name)
	err := <-done
	var te *TaskError
	if !errors.As(err, &te) || te.Task != ps.name || !errors.Is(err, ErrTaskLost) {
		t.Fatalf("cleanup cut off by the ps's loss: %v, want the ps's *TaskError", err)
	}
}

// TestProbeAcrossReviveSparesRevivedTask: a probe that started on a lost
// task's old Caller does not mark it lost again when the restarted task's
// Caller is replaced and the task revived while the probe looks it up.
// The probe's failure on the old Caller says nothing of the task as it is
// now; it marked the revived task lost when the revival fell between the
// probe's reads of the Caller and of the task's state.
func TestProbeAcrossReviveSparesRevivedTask(t *testing.T) {
	ps := &fakeTask{name: "/job:ps/replica:0/task:0"}
	wk := &fakeTask{name: "/job:worker/replica:0/task:0"}
	d := New("s", ps, wk)
	back := &fakeTask{name: ps.name}
	var revived bool
	d.health.probing = func(task string) {
		if task != ps.name || revived || d.Lost(ps.name) == nil {
			return
		}
		revived = true
		if err := d.Replace(back); err != nil {
			t.Error(err)
		}
		d.Revive(ps.name)
	}
	// No periodic probe within the test: only its own probes run.
	d.Watch(time.Hour)
	defer d.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ps.set(false, true)
	if err := d.Probe(ctx, ps.name); !errors.Is(err, ErrTaskLost) {
		t.Fatalf("probe of the dead ps: %v, want ErrTaskLost", err)
	}
	if err := d.Probe(ctx, ps.name); err != nil || !revived {
		t.Fatalf("probe across the revival: %v (revived: %v), want nil", err, revived)
	}
	if te := d.Lost(ps.name); te != nil {
		t.Fatalf("the revived ps is lost: %v", te)
	}
}

// incTask is a fakeTask that answers GetStatus with its incarnation.
type incTask struct {
	*fakeTask
	inc atomic.Uint64
}

func (f *incTask) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return &tfpb.GetStatusResponse{DeviceAttributes: []*tfpb.DeviceAttributes{{Name: f.name + "/device:CPU:0", Incarnation: f.inc.Load()}}}, nil
}

// TestProbeFindsRestartedTask: a task that answers a probe with another
// incarnation than the one expected restarted, faster than a probe found
// it not answering: it is lost, with an error wrapping ErrRestarted, and
// the steps tied to it fail with it. Expecting the new incarnation revives
// it; expecting another does not, nor does a task expected of no
// incarnation count as restarted.
func TestProbeFindsRestartedTask(t *testing.T) {
	ps := &incTask{fakeTask: &fakeTask{name: "/job:ps/replica:0/task:0"}}
	wk := &incTask{fakeTask: &fakeTask{name: "/job:worker/replica:0/task:0"}}
	ps.inc.Store(1)
	wk.inc.Store(7)
	d := New("s", ps, wk)
	// No periodic probe within the test: only its own probes run.
	d.Watch(time.Hour)
	defer d.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d.ExpectIncarnation(ps.name, 1)
	if err := d.Probe(ctx, ps.name, wk.name); err != nil {
		t.Fatalf("probe of the tasks as expected: %v", err)
	}
	ps.inc.Store(2)
	wk.inc.Store(8)
	err := d.Probe(ctx, ps.name, wk.name)
	var te *TaskError
	if !errors.As(err, &te) || te.Task != ps.name || !errors.Is(err, ErrTaskLost) || !errors.Is(err, ErrRestarted) {
		t.Fatalf("probe of the restarted ps: %v, want its *TaskError wrapping ErrRestarted", err)
	}
	if want := ps.name + " lost: restarted: incarnation 0x2, was 0x1"; err.Error() != want {
		t.Errorf("probe: %q, want %q", err, want)
	}
	if d.Lost(wk.name) != nil {
		t.Errorf("the worker, of no expected incarnation, is lost: %v", d.Lost(wk.name))
	}
	if err := d.RunPartitions(ctx, 1, Partition{Graph: Graph{Task: ps.name, Handle: "g"}}); !errors.Is(err, ErrRestarted) {
		t.Errorf("step on the restarted ps: %v, want its loss", err)
	}
	d.ExpectIncarnation(ps.name, 3)
	if d.Lost(ps.name) == nil {
		t.Fatal("expecting an incarnation the ps did not restart to revived it")
	}
	d.ExpectIncarnation(ps.name, 2)
	if te := d.Lost(ps.name); te != nil {
		t.Fatalf("expecting the incarnation the ps restarted to left it lost: %v", te)
	}
	if err := d.Probe(ctx, ps.name); err != nil {
		t.Errorf("probe of the ps as now expected: %v", err)
	}
}
