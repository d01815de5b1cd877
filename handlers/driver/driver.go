package driver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/wire/tfpb"
)

// ErrUnknownTask is returned (wrapped) for a task the driver has no Caller
// for.
var ErrUnknownTask = errors.New("driver: unknown task")

// A Driver is the master of one session on a cluster: one Caller per task.
// Steps run partitions on several tasks concurrently, as TensorFlow's
// master does, and clean up after themselves. Safe for concurrent use by
// several steps at once.
type Driver struct {
	session string
	order   []string

	cmu     sync.RWMutex // guards callers and retired (see Replace)
	callers map[string]Caller
	retired map[string]handlers.Stats // of the Callers replaced, by task

	mu     sync.Mutex
	graphs []Graph
	open   bool

	health health
}

// New returns a driver for session over callers, one per task; it owns
// them and closes them in Close.
func New(session string, callers ...Caller) *Driver {
	d := &Driver{session: session, callers: make(map[string]Caller, len(callers))}
	for _, c := range callers {
		d.callers[c.Task()] = c
		d.order = append(d.order, c.Task())
	}
	return d
}

// Session returns the session handle.
func (d *Driver) Session() string { return d.session }

// Tasks returns the tasks in the order given to New.
func (d *Driver) Tasks() []string { return d.order }

// Caller returns the Caller of task.
func (d *Driver) Caller(task string) (Caller, error) {
	d.cmu.RLock()
	c, ok := d.callers[task]
	d.cmu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrUnknownTask, task)
	}
	return c, nil
}

// Replace makes c the Caller of its task, one of the driver's, and closes
// the Caller it replaces: the task restarted at another address, or a
// fresh connection should not wait out the old one's backoff. Calls in
// flight on the old Caller fail; the task's sessions and graphs are to be
// created again (see CreateSessions).
func (d *Driver) Replace(c Caller) error {
	d.cmu.Lock()
	old, ok := d.callers[c.Task()]
	if ok && old != c {
		d.callers[c.Task()] = c
		if d.retired == nil {
			d.retired = make(map[string]handlers.Stats)
		}
		d.retired[c.Task()] = d.retired[c.Task()].Add(old.Stats())
	}
	d.cmu.Unlock()
	if !ok {
		return fmt.Errorf("%w %s", ErrUnknownTask, c.Task())
	}
	if old != c {
		old.Close()
	}
	return nil
}

// each calls f on every task concurrently and returns the first error.
func (d *Driver) each(f func(task string, c Caller) error) error {
	errs := make([]error, len(d.order))
	var wg sync.WaitGroup
	for i, task := range d.order {
		wg.Add(1)
		c, _ := d.Caller(task)
		go func() {
			defer wg.Done()
			errs[i] = f(task, c)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Status calls GetStatus on every task and returns the answers by task.
// A task that does not answer fails the whole call, naming the task.
func (d *Driver) Status(ctx context.Context) (map[string]*tfpb.GetStatusResponse, error) {
	var mu sync.Mutex
	out := make(map[string]*tfpb.GetStatusResponse, len(d.order))
	err := d.each(func(task string, c Caller) error {
		st, err := c.GetStatus(ctx)
		if err != nil {
			return fmt.Errorf("driver: GetStatus of %s: %w", task, err)
		}
		mu.Lock()
		out[task] = st
		mu.Unlock()
		return nil
	})
	return out, err
}

// CreateSessions creates the driver's worker session on every task not
// found lost (see Watch); a task that has its session already keeps it.
// serverDef, when not nil, is sent to each task with its own job and
// index: the cluster as the driver knows it, with the address of a peer
// that restarted elsewhere.
// Session state is not isolated: variables are shared with other sessions,
// as between-graph replicas of TensorFlow share their parameter servers.
func (d *Driver) CreateSessions(ctx context.Context, serverDef *tfpb.ServerDef) error {
	err := d.each(func(task string, c Caller) error {
		if d.Lost(task) != nil {
			return nil
		}
		req := &tfpb.CreateWorkerSessionRequest{SessionHandle: d.session}
		if serverDef != nil {
			sd := cloneServerDef(serverDef)
			if job, idx, ok := parseTask(task); ok {
				sd.JobName, sd.TaskIndex = job, int32(idx)
			}
			req.ServerDef = sd
		}
		if err := c.CreateWorkerSession(ctx, req); err != nil {
			return fmt.Errorf("driver: CreateWorkerSession on %s: %w", task, err)
		}
		return nil
	})
	if err == nil {
		d.mu.Lock()
		d.open = true
		d.mu.Unlock()
	}
	return err
}

// A Graph is a partition registered on one task.
type Graph struct {
	Task   string
	Handle string
}

// RegisterGraph registers a partition graph on task.
func (d *Driver) RegisterGraph(ctx context.Context, task string, def *tfpb.GraphDef) (Graph, error) {
	c, err := d.Caller(task)
	if err != nil {
		return Graph{}, err
	}
	resp, err := c.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{
		SessionHandle:             d.session,
		CreateWorkerSessionCalled: true,
		GraphDef:                  def,
	})
	if err != nil {
		return Graph{}, fmt.Errorf("driver: RegisterGraph on %s: %w", task, err)
	}
	g := Graph{Task: task, Handle: resp.GetGraphHandle()}
	d.mu.Lock()
	d.graphs = append(d.graphs, g)
	d.mu.Unlock()
	return g, nil
}

// A Partition is one RunGraph of a step: a registered graph, its feeds, the
// keys it fetches, and where the fetched tensors go (Out may be nil when
// nothing is fetched).
type Partition struct {
	Graph   Graph
	Feeds   []handlers.Feed
	Fetches []string
	Out     *handlers.Fetched
}

// RunPartitions runs parts concurrently as step step and waits for all of
// them. When one fails, the others are cancelled (a partition waiting for a
// tensor the failed one would have sent would otherwise wait for its
// deadline) and the first failure is returned. It does not clean up the
// step: call CleanupStep once the step's last partitions have run.
func (d *Driver) RunPartitions(ctx context.Context, step int64, parts ...Partition) error {
	if d.health.timeout == 0 {
		return d.runPartitions(ctx, step, parts...)
	}
	tasks := make([]string, len(parts))
	for i := range parts {
		tasks[i] = parts[i].Graph.Task
	}
	return d.watched(ctx, tasks, func(ctx context.Context) error { return d.runPartitions(ctx, step, parts...) })
}

// watched runs f with ctx tied to tasks' health: when one is found lost, or
// when f fails and one no longer answers, the error is its *TaskError.
func (d *Driver) watched(ctx context.Context, tasks []string, f func(context.Context) error) error {
	tctx, ts, stop := d.tie(ctx, tasks...)
	err := f(tctx)
	cause := context.Cause(tctx)
	stop()
	if err == nil {
		return nil
	}
	var te *TaskError
	// The loss reaches tctx on a goroutine of its own (context.AfterFunc),
	// which may not have run yet when a call fails for the same loss by
	// another way: its connection reset, or closed when the restarted
	// task's Caller replaced it. Its state says so at once, and keeps
	// saying so after a revival, when a probe of the task would answer.
	if !errors.As(cause, &te) {
		te = ts.lostOf()
	}
	if te != nil {
		if errors.Is(err, te) {
			return err
		}
		return &StepError{Lost: te, Err: err}
	}
	return d.diagnose(ctx, err, tasks...)
}

func (d *Driver) runPartitions(ctx context.Context, step int64, parts ...Partition) error {
	if len(parts) == 1 {
		return d.runPartition(ctx, step, &parts[0])
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errs := make([]error, len(parts))
	run := func(i int) {
		if errs[i] = d.runPartition(ctx, step, &parts[i]); errs[i] != nil {
			cancel(errs[i])
		}
	}
	// The calling goroutine runs the first partition itself: one goroutine
	// and one wake-up fewer on every step.
	var wg sync.WaitGroup
	for i := 1; i < len(parts); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(i)
		}()
	}
	run(0)
	wg.Wait()
	// The first failure caused the cancellations that followed.
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return errors.Join(errs...)
}

func (d *Driver) runPartition(ctx context.Context, step int64, p *Partition) error {
	c, err := d.Caller(p.Graph.Task)
	if err != nil {
		return err
	}
	req := &tfpb.RunGraphRequest{
		SessionHandle:             d.session,
		CreateWorkerSessionCalled: true,
		GraphHandle:               p.Graph.Handle,
		StepId:                    step,
		RecvKey:                   p.Fetches,
	}
	out := p.Out
	if out == nil {
		out = new(handlers.Fetched)
		defer out.Release()
	}
	if err := c.RunGraph(ctx, req, p.Feeds, out); err != nil {
		return fmt.Errorf("driver: RunGraph %s on %s, step %d: %w", p.Graph.Handle, p.Graph.Task, step, err)
	}
	if len(out.Keys) != len(p.Fetches) {
		n := len(out.Keys)
		out.Release()
		return fmt.Errorf("driver: RunGraph %s on %s, step %d: %d tensors fetched for %d keys", p.Graph.Handle, p.Graph.Task, step, n, len(p.Fetches))
	}
	return nil
}

// CleanupStep tells tasks that step is over, so they drop what their
// rendezvous still holds for it. The tasks are told concurrently.
func (d *Driver) CleanupStep(ctx context.Context, step int64, tasks ...string) error {
	if d.health.timeout == 0 {
		return d.cleanupStep(ctx, step, tasks...)
	}
	return d.watched(ctx, tasks, func(ctx context.Context) error { return d.cleanupStep(ctx, step, tasks...) })
}

func (d *Driver) cleanupStep(ctx context.Context, step int64, tasks ...string) error {
	cleanup := func(task string) error {
		c, err := d.Caller(task)
		if err == nil {
			err = c.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
		}
		if err != nil {
			return fmt.Errorf("driver: CleanupGraph step %d on %s: %w", step, task, err)
		}
		return nil
	}
	if len(tasks) == 1 {
		return cleanup(tasks[0])
	}
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = cleanup(task)
		}()
	}
	errs[0] = cleanup(tasks[0])
	wg.Wait()
	return errors.Join(errs...)
}

// Stats returns the sum of every Caller's calls and bytes, those replaced
// included.
func (d *Driver) Stats() handlers.Stats {
	var s handlers.Stats
	for _, task := range d.order {
		s = s.Add(d.TaskStats(task))
	}
	return s
}

// TaskStats returns the calls and bytes of task's Callers, those
// replaced included.
func (d *Driver) TaskStats(task string) handlers.Stats {
	d.cmu.RLock()
	defer d.cmu.RUnlock()
	s := d.retired[task]
	if c := d.callers[task]; c != nil {
		s = s.Add(c.Stats())
	}
	return s
}

// Forget deregisters graphs, on the tasks not found lost, and forgets
// them (see Drop). It reports every failure but forgets every graph.
func (d *Driver) Forget(ctx context.Context, graphs ...Graph) error {
	d.Drop(graphs...)
	return d.deregister(ctx, graphs)
}

// Drop forgets graphs without deregistering them, so that Close does not
// either: the graphs of a task that restarted are gone with it, and its
// new graphs may have their handles.
func (d *Driver) Drop(graphs ...Graph) {
	drop := make(map[Graph]bool, len(graphs))
	for _, g := range graphs {
		drop[g] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.graphs = slices.DeleteFunc(d.graphs, func(g Graph) bool { return drop[g] })
}

// deregister deregisters graphs, skipping the tasks found lost.
func (d *Driver) deregister(ctx context.Context, graphs []Graph) error {
	var errs []error
	for _, g := range graphs {
		if d.Lost(g.Task) != nil {
			continue
		}
		c, err := d.Caller(g.Task)
		if err == nil {
			err = c.DeregisterGraph(ctx, &tfpb.DeregisterGraphRequest{SessionHandle: d.session, CreateWorkerSessionCalled: true, GraphHandle: g.Handle})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("driver: DeregisterGraph %s on %s: %w", g.Handle, g.Task, err))
		}
	}
	return errors.Join(errs...)
}

// Close deregisters the driver's graphs, deletes its worker sessions and
// closes its callers. It reports every failure, but tries every step; tasks
// found lost (see Watch) are not called.
func (d *Driver) Close(ctx context.Context) error {
	d.stopWatch()
	d.mu.Lock()
	graphs, open := d.graphs, d.open
	d.graphs, d.open = nil, false
	d.mu.Unlock()
	var errs []error
	if err := d.deregister(ctx, graphs); err != nil {
		errs = append(errs, err)
	}
	if open {
		errs = append(errs, d.each(func(task string, c Caller) error {
			if d.Lost(task) != nil {
				return nil
			}
			if err := c.DeleteWorkerSession(ctx, &tfpb.DeleteWorkerSessionRequest{SessionHandle: d.session}); err != nil {
				return fmt.Errorf("driver: DeleteWorkerSession on %s: %w", task, err)
			}
			return nil
		}))
	}
	for _, task := range d.order {
		c, _ := d.Caller(task)
		c.Close()
	}
	return errors.Join(errs...)
}
