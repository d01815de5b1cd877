package lr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/driver/drivertest"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire/tfpb"
)

// restarter is a Rejoiner over an in-process cluster whose ps it stops
// and, when the job first looks for it, starts again at its addresses: a
// new incarnation with no sessions, graphs or variables.
type restarter struct {
	t      *testing.T
	local  *tasks.Local
	peers  *tasks.Peers
	d      *driver.Driver
	ckpt   string
	logger *slog.Logger

	mu        sync.Mutex
	stopped   bool
	restarted bool
}

// stop closes ps 0.
func (r *restarter) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.local.Servers[0].Close()
	r.stopped = true
}

func (r *restarter) Find(ctx context.Context, task string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.local.Servers[0]
	if task == old.Task() && r.stopped && !r.restarted {
		s, err := tasks.Listen("ps", 0, old.GRPCAddr, old.StarAddr, true, nil)
		if err != nil {
			return old.GRPCAddr, err
		}
		s.CheckpointDir = r.ckpt
		if err := s.Start(r.local.Layout, r.logger); err != nil {
			s.Close()
			return old.GRPCAddr, err
		}
		r.local.Servers[0], r.restarted = s, true
	}
	addrs, err := r.peers.Addrs(task)
	if err != nil {
		return "", err
	}
	if _, err := r.peers.Repoint(task, addrs); err != nil {
		return addrs.GRPC, err
	}
	c, err := r.peers.Caller(task)
	if err != nil {
		return addrs.GRPC, err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := c.GetStatus(sctx); err != nil {
		return addrs.GRPC, err
	}
	return addrs.GRPC, r.d.Replace(c)
}

func (r *restarter) ServerDef() *tfpb.ServerDef { return nil }

// TestRecoverRestartedPS stops the ps of an in-process cluster after a
// checkpoint, starts it again (same addresses, nothing of its state) when
// the job looks for it: the job restores it from the checkpoint, counts
// the steps undone and lost, and ends with the loss of a run that did not
// break.
func TestRecoverRestartedPS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Steps, cfg.Vocab, cfg.HeldOut, cfg.Workers = 300, 2000, 1024, 2
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ckpt := t.TempDir()
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 2, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: logger, CheckpointDir: ckpt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	peers, callers := callersOf(t, local)
	d := driver.New("recover-test", callers...)
	d.Watch(2 * time.Second)
	job := newJob(t, cfg, d)
	r := &restarter{t: t, local: local, peers: peers, d: d, ckpt: ckpt, logger: logger}
	var logs []string
	var logMu sync.Mutex
	job.s.RecoverTasks(train.RecoverOptions{
		Rejoin:  r,
		Timeout: 20 * time.Second,
		Every:   20 * time.Millisecond,
		Restore: func(ctx context.Context) (int64, error) {
			step, _, err := job.Restore(ctx, ckpt)
			return step, err
		},
		Log: func(msg string) {
			logMu.Lock()
			logs = append(logs, msg)
			logMu.Unlock()
		},
	})
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer job.s.Close(ctx)
	// Saved at global step 200, the ps is stopped at 300 of 600.
	var once, saved sync.Once
	job.s.AfterStep(func(ctx context.Context, step int64) error {
		if step >= 200 {
			var err error
			saved.Do(func() { _, err = job.Save(ctx, ckpt, step, 0) })
			if err != nil {
				return err
			}
		}
		if step >= 300 {
			once.Do(func() { go r.stop() })
		}
		return nil
	})
	sum, err := job.run(ctx)
	if err != nil {
		t.Fatalf("run: %v\nrecovery: %s", err, strings.Join(logs, "\n"))
	}
	logMu.Lock()
	log := strings.Join(logs, "\n")
	logMu.Unlock()
	t.Logf("steps %d, lost %d, undone %d, held-out %.4f -> %.4f\n%s", sum.Steps, sum.LostSteps, sum.UndoneSteps, sum.InitialLoss, sum.FinalLoss, log)
	r.mu.Lock()
	restarted := r.restarted
	r.mu.Unlock()
	if !restarted || !strings.Contains(log, "/job:ps/replica:0/task:0 answers again") {
		t.Fatalf("the ps was not restarted and found again:\n%s", log)
	}
	if sum.UndoneSteps <= 0 || sum.Steps+sum.LostSteps != int64(2*cfg.Steps) {
		t.Errorf("steps %d, lost %d, undone %d: want %d done or lost and some undone", sum.Steps, sum.LostSteps, sum.UndoneSteps, 2*cfg.Steps)
	}
	if got, want := job.GlobalStep(), sum.Steps-sum.UndoneSteps; got != want {
		t.Errorf("global step %d, want the steps done less those undone, %d", got, want)
	}
	if sum.FinalLoss > 0.9*sum.InitialLoss {
		t.Errorf("held-out loss %.4f -> %.4f: the restored model did not keep learning", sum.InitialLoss, sum.FinalLoss)
	}
}

// newFakeJob makes a job of 12 steps on one worker and one ps, fake tasks
// of a fakeCluster that its driver watches; the test sets its recovery.
func newFakeJob(t *testing.T, name string) (Config, *fakeCluster, *drivertest.Task, *driver.Driver, *job) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Steps, cfg.Vocab, cfg.HeldOut, cfg.Workers, cfg.BatchSize = 12, 64, 16, 1, 8
	c := newFakeCluster(cfg.BatchSize)
	ps := c.Task("/job:ps/replica:0/task:0", 1)
	d := driver.New(name, ps, c.Task(workerTask(0), 1))
	d.Watch(2 * time.Second)
	return cfg, c, ps, d, newJob(t, cfg, d)
}

// setupKillAt5 sets job up and has ps lost at its next call after step 5.
func setupKillAt5(t *testing.T, ctx context.Context, job *job, c *fakeCluster, ps *drivertest.Task) {
	t.Helper()
	if err := job.s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	job.s.AfterStep(func(_ context.Context, step int64) error {
		if step == 5 {
			c.KillNext(ps)
		}
		return nil
	})
}

// TestRecoveryWaitsForCleanups: a recovery replaces the lost ps's Caller
// only once the failed step's cleanup is done with it. A cleanup call
// still on the Caller that Find closes fails with "client closed", which
// the run forgives only when the driver has already cancelled the call
// with the ps's loss, on a goroutine of its own: under load it may not
// have, and the run failed with "CleanupGraph ... unavailable: client
// closed". The ps's cleanup calls wait here, whatever their context, until
// every other goroutine is blocked (synctest), so that a recovery that
// does not wait for them calls Find while one is in flight, every time.
func TestRecoveryWaitsForCleanups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, c, ps, d, job := newFakeJob(t, "cleanup-test")
		var logs []string
		job.s.RecoverTasks(train.RecoverOptions{
			Rejoin: &fakeRejoiner{c: c, d: d, ps: ps.Task()},
			Every:  100 * time.Millisecond,
			Log:    func(msg string) { logs = append(logs, msg) },
		})
		ctx := t.Context()
		setupKillAt5(t, ctx, job, c, ps)
		sum, err := c.run(ctx, job)
		if err != nil {
			t.Fatalf("run: %v\nrecovery: %s", err, strings.Join(logs, "\n"))
		}
		c.mu.Lock()
		held, finds, inFlight := c.heldCalls, c.finds, c.inFlightAtFind
		c.mu.Unlock()
		if held == 0 || finds != 1 {
			t.Fatalf("%d cleanup calls waited on the lost ps, Find called %d times: want some, and once", held, finds)
		}
		if inFlight > 0 {
			t.Errorf("Find replaced the lost ps's Caller with %d cleanup calls in flight on it", inFlight)
		}
		if sum.LostSteps != 1 || sum.Steps != int64(cfg.Steps)-1 {
			t.Errorf("steps %d, lost %d: want %d and 1", sum.Steps, sum.LostSteps, cfg.Steps-1)
		}
	})
}

// TestRecoverRestoresAfterFailedInit: a ps restarts, and while the
// recovery initializes it, it stops answering for a while and comes back
// as it was (same incarnation). The recovery's retry must still initialize
// and restore the servers: build had already recorded the new
// incarnation, and a retry that went by the incarnations alone found none
// changed and left the restarted ps with no variables set, silently.
func TestRecoverRestoresAfterFailedInit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c, ps, d, job := newFakeJob(t, "reinit-test")
		// The restarted ps is lost again at its first RunGraph, the
		// recovery's initialization; found again, it did not restart.
		rj := &fakeRejoiner{c: c, d: d, ps: ps.Task(), restarts: 1}
		rj.found = func(f *drivertest.Task) {
			if rj.n == 1 {
				c.KillNext(f)
			}
		}
		var logs []string
		restores := 0
		job.s.RecoverTasks(train.RecoverOptions{
			Rejoin: rj,
			Every:  100 * time.Millisecond,
			Restore: func(context.Context) (int64, error) {
				restores++
				return 2, nil
			},
			Log: func(msg string) { logs = append(logs, msg) },
		})
		ctx := t.Context()
		setupKillAt5(t, ctx, job, c, ps)
		sum, err := c.run(ctx, job)
		log := strings.Join(logs, "\n")
		if err != nil {
			t.Fatalf("run: %v\nrecovery: %s", err, log)
		}
		if rj.n != 2 || !strings.Contains(log, "initialize the table") || !strings.Contains(log, "recovering again") {
			t.Fatalf("ps found %d times: want the initialization to fail and the ps found again, twice in all\nrecovery: %s", rj.n, log)
		}
		if restores != 1 {
			t.Errorf("the parameter servers were restored %d times after the restart, want once\nrecovery: %s", restores, log)
		}
		if sum.UndoneSteps <= 0 {
			t.Errorf("undone steps %d: want those since the restored step", sum.UndoneSteps)
		}
	})
}

// fakeCluster is a drivertest.Cluster whose workers' partitions fetch a
// loss and a batch of probabilities at once. It records the lost ps's
// cleanup calls, which wait until settle lets them go.
type fakeCluster struct {
	*drivertest.Cluster
	batch  int
	events chan struct{} // a call waits for settle

	mu             sync.Mutex
	held           []chan struct{} // cleanup calls waiting
	find           chan struct{}   // Find waiting, when not nil
	heldCalls      int
	finds          int
	inFlightAtFind int
}

// newFakeCluster returns the fakeCluster of workers that fetch batches
// of batch probabilities.
func newFakeCluster(batch int) *fakeCluster {
	c := &fakeCluster{Cluster: &drivertest.Cluster{}, batch: batch, events: make(chan struct{}, 1)}
	c.Fetch = func(keys []string, out *handlers.Fetched) {
		out.Keys = append(out.Keys[:0], keys...)
		out.Tensors = append(out.Tensors[:0], floatTensor([]float32{0.5}), floatTensor(make([]float32, batch), int64(batch)))
	}
	// A dead task's cleanup calls wait for settle, whatever their context.
	c.DeadCleanup = func() { c.wait(false) }
	return c
}

// run runs job and closes it, settling whenever a call waits and every
// other goroutine of the bubble is blocked.
func (c *fakeCluster) run(ctx context.Context, job *job) (*summary, error) {
	done := make(chan error, 1)
	var sum *summary
	go func() {
		var err error
		sum, err = job.run(ctx)
		done <- errors.Join(err, job.s.Close(ctx))
	}()
	for {
		select {
		case err := <-done:
			return sum, err
		case <-c.events:
			synctest.Wait()
			c.settle()
		}
	}
}

// wait blocks until settle lets the caller go, with find for Find.
func (c *fakeCluster) wait(find bool) {
	ch := make(chan struct{})
	c.mu.Lock()
	if find {
		c.find, c.finds = ch, c.finds+1
	} else {
		c.held, c.heldCalls = append(c.held, ch), c.heldCalls+1
	}
	c.mu.Unlock()
	select {
	case c.events <- struct{}{}:
	default: // settle is due already
	}
	<-ch
}

// settle runs once every other goroutine is blocked: it lets the waiting
// cleanup calls and Find go, counting the calls still in flight when Find
// was called.
func (c *fakeCluster) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.find != nil {
		c.inFlightAtFind += len(c.held)
	}
	for _, ch := range c.held {
		close(ch)
	}
	c.held = nil
	if c.find != nil {
		close(c.find)
		c.find = nil
	}
}

// fakeRejoiner finds the lost ps restarted: a new incarnation, once settle
// lets Find go.
type fakeRejoiner struct {
	c  *fakeCluster
	d  *driver.Driver
	ps string
	// restarts, when not 0, is how many Finds find the ps restarted; those
	// after find it as it was, its incarnation the same: its connection
	// broke, or it stopped answering for a while, but it did not restart.
	restarts int
	// found, when set, is told of each Caller that Find puts in place.
	found func(*drivertest.Task)

	n int // Finds of the ps
}

func (r *fakeRejoiner) Find(_ context.Context, task string) (string, error) {
	if task != r.ps {
		return "", fmt.Errorf("find %s: not a task that restarts", task)
	}
	r.c.wait(true)
	old, err := r.d.Caller(task)
	if err != nil {
		return "", err
	}
	r.n++
	inc := old.(*drivertest.Task).Incarnation()
	if r.restarts == 0 || r.n <= r.restarts {
		inc++
	}
	f := r.c.Task(task, inc)
	if r.found != nil {
		r.found(f)
	}
	return "fake:" + task, r.d.Replace(f)
}

func (r *fakeRejoiner) ServerDef() *tfpb.ServerDef { return nil }
