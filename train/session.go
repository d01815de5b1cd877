package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire/tfpb"
)

// Options say what a Session trains on.
type Options struct {
	// PS and Workers are the tasks of jobs "ps" and "worker".
	PS, Workers int
	// Steps is the training steps each replica runs.
	Steps int
}

// A Session owns a training job's life, as TensorFlow's
// MonitoredTrainingSession does: it builds the model for the tasks that
// answer, runs every replica's steps concurrently, calls the hooks after
// each step, and, as asked (FailOverWorkers, RecoverTasks), gives a lost
// worker's batches to the others, waits for a lost parameter server and
// restores the model, and takes restarted tasks back in.
type Session struct {
	d    *driver.Driver
	m    Model
	opts Options

	tasks *Tasks // the last Build's; replaced while no step runs
	// failover gives a lost worker's steps to the others.
	failover bool
	rec      *recovery // recover.go; nil without RecoverTasks
	hooks    []func(ctx context.Context, globalStep int64) error

	nextStep atomic.Int64
	steps    atomic.Int64
	lost     atomic.Int64 // steps that failed with their task
	// base is the global step the job started from; the session's own
	// steps count on from it.
	base atomic.Int64
	// last, when not 0, is the global step the run ends at (StopAtStep).
	last int64

	mu sync.Mutex
	// Under StopAtStep, inflight counts the steps claimed and not yet
	// done or failed, and reserved the steps of the replicas' own
	// Options.Steps not yet claimed; guarded by mu, as is the count of
	// steps done, so that they are read together with the global step.
	inflight, reserved int64
	losses             []float64 // by completion order

	// started holds, by replica, the global step its running step began
	// at (no later than the one its model was given), math.MaxInt64 while
	// none runs: what OldestInFlight reads.
	started []atomic.Int64
}

// NewSession returns the session that trains m over d, whose Callers
// reach the tasks; a model that is a Binder is bound to it.
func NewSession(d *driver.Driver, m Model, o Options) *Session {
	s := &Session{d: d, m: m, opts: o, started: make([]atomic.Int64, max(o.Workers, 0))}
	for i := range s.started {
		s.started[i].Store(math.MaxInt64)
	}
	// Step ids are unique across the runs that a task may see.
	s.nextStep.Store(int64(rand.Uint32())<<20 + 1)
	if b, ok := m.(Binder); ok {
		b.Bind(s)
	}
	return s
}

// NextStepID returns a step id no other step of the session has.
func (s *Session) NextStepID() int64 { return s.nextStep.Add(1) }

// Driver returns the session's driver.
func (s *Session) Driver() *driver.Driver { return s.d }

// Tasks returns the tasks of the last Build.
func (s *Session) Tasks() *Tasks { return s.tasks }

// AfterStep adds f to the hooks every worker calls after each of its
// training steps, with the global step; an error of f ends the run with
// it. The hooks are called by the workers concurrently. Call it before
// Run.
func (s *Session) AfterStep(f func(ctx context.Context, globalStep int64) error) {
	s.hooks = append(s.hooks, f)
}

// StopAtStep makes the run end at global step last, as TensorFlow's
// StopAtStepHook(last_step) does: the replicas take steps while the
// global step and the steps in flight are short of it, so that a step
// lost with its task is taken again, and the steps a recovery undoes
// (back to a checkpoint's global step) are trained again; Options.Steps
// no longer bounds a replica. Call it before Run.
func (s *Session) StopAtStep(last int64) {
	s.last = last
	s.reserved = int64(s.opts.Workers) * int64(s.opts.Steps)
}

// LastStep returns the global step the run ends at, 0 without StopAtStep.
func (s *Session) LastStep() int64 { return s.last }

// claim reserves a replica's n-th step of the run: false once the
// replica has run Options.Steps, or under StopAtStep once the steps done,
// in flight and still reserved reach the last step. Each replica first
// runs its own Options.Steps, so that an unbroken run gives every worker
// the same steps; the steps lost or undone are then claimed by whichever
// replica asks first: global step + in flight + reserved never passes
// the last step, and reaches it when the run ends.
func (s *Session) claim(n int) bool {
	if s.last == 0 {
		return n < s.opts.Steps
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.GlobalStep()+s.inflight >= s.last:
		return false
	case n < s.opts.Steps:
		s.reserved--
	case s.GlobalStep()+s.inflight+s.reserved >= s.last:
		return false
	}
	s.inflight++
	return true
}

// finish ends a claimed step: counted done with its loss when ok, and
// returns the steps done.
func (s *Session) finish(ok bool, loss float64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != 0 {
		s.inflight--
	}
	if !ok {
		return s.steps.Load()
	}
	s.losses = append(s.losses, loss)
	return s.steps.Add(1)
}

// GlobalStep is the steps done, by all workers together, since the
// model was initialized: those of a restored checkpoint and this run's.
func (s *Session) GlobalStep() int64 { return s.base.Load() + s.steps.Load() }

// OldestInFlight is the least global step a step still running began at,
// or GlobalStep when none runs: every update a step made at a global step
// below it has been applied. An export of the rows changed up to it, such
// as a change stream's, misses none of a lagging worker's.
func (s *Session) OldestInFlight() int64 {
	oldest := s.GlobalStep()
	for i := range s.started {
		oldest = min(oldest, s.started[i].Load())
	}
	return oldest
}

// SetGlobalStep sets the global step to n, as a restore does: the
// session's steps from now on count on from it.
func (s *Session) SetGlobalStep(n int64) { s.base.Store(n - s.steps.Load()) }

// Steps returns the training steps done so far, and those that failed
// with a lost task.
func (s *Session) Steps() (done, lost int64) { return s.steps.Load(), s.lost.Load() }

// Losses returns the losses of the steps done from the i-th on, in the
// order they completed.
func (s *Session) Losses(i int) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.losses[min(i, len(s.losses)):])
}

// UndoneSteps returns the global steps recoveries undid: those since
// the checkpoint restored, or all of them without one.
func (s *Session) UndoneSteps() int64 {
	if s.rec == nil {
		return 0
	}
	return s.rec.undone.Load()
}

// PSTasks returns the parameter servers' task names.
func (s *Session) PSTasks() []string { return taskNames("ps", s.opts.PS) }

// WorkerTask returns worker w's task name.
func WorkerTask(w int) string { return cluster.TaskName("worker", w) }

func taskNames(job string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = cluster.TaskName(job, i)
	}
	return out
}

// Setup asks every task for its status (the incarnations rendezvous keys
// need), creates the worker sessions, builds the model and initializes
// it.
func (s *Session) Setup(ctx context.Context) error {
	if err := s.build(ctx, nil); err != nil {
		return err
	}
	return s.m.Initialize(ctx)
}

// build asks every task not found lost for its status, creates the
// sessions (carrying def, when not nil) and builds the model, replacing
// the graphs of the last build, which it deregisters: after a restart the
// incarnations, and so the rendezvous keys, are new. A lost worker's
// replica gets no graphs (its steps go over another's). The steps must be
// paused.
func (s *Session) build(ctx context.Context, def *tfpb.ServerDef) error {
	prev := s.tasks
	t := &Tasks{d: s.d}
	for _, job := range []string{"ps", "worker"} {
		n := s.opts.PS
		if job == "worker" {
			n = s.opts.Workers
		}
		for i := range n {
			task, err := s.status(ctx, job, i, prev)
			if err != nil {
				return err
			}
			if job == "ps" {
				t.PS = append(t.PS, task)
			} else {
				t.Workers = append(t.Workers, task)
			}
		}
	}
	if prev == nil && !slices.ContainsFunc(t.Workers, func(w Task) bool { return w.Live }) {
		return fmt.Errorf("no worker answers: %w", s.d.Lost(WorkerTask(0)))
	}
	if err := s.d.CreateSessions(ctx, def); err != nil {
		return err
	}
	if err := s.m.Build(ctx, t); err != nil {
		s.d.Forget(ctx, t.take()...)
		return err
	}
	s.tasks = t
	if prev == nil {
		return nil
	}
	// A restarted task's graphs are gone with it, and its new graphs may
	// have their handles: those are dropped, not deregistered.
	restarted := map[string]bool{}
	for i, p := range prev.PS {
		restarted[p.Name] = t.PS[i].Incarnation != p.Incarnation
	}
	for i, w := range prev.Workers {
		restarted[w.Name] = t.Workers[i].Incarnation != w.Incarnation
	}
	old := slices.DeleteFunc(prev.take(), func(g driver.Graph) bool { return g.Handle == "" })
	gone := slices.DeleteFunc(slices.Clone(old), func(g driver.Graph) bool { return !restarted[g.Task] })
	old = slices.DeleteFunc(old, func(g driver.Graph) bool { return restarted[g.Task] })
	s.d.Drop(gone...)
	s.d.Forget(ctx, old...)
	return nil
}

// status asks task i of job for its status. A worker the session had,
// lost since, is left out (not Live, its last incarnation kept); a
// parameter server that does not answer is an error (see recover).
func (s *Session) status(ctx context.Context, job string, i int, prev *Tasks) (Task, error) {
	name := cluster.TaskName(job, i)
	t := Task{Name: name, Device: name + "/device:CPU:0", Live: true}
	c, err := s.d.Caller(name)
	if err != nil {
		return t, err
	}
	known := job == "worker" && prev != nil && len(prev.Workers) > i // a worker the job had
	if known && s.d.Lost(name) != nil {
		t.Live, t.Incarnation = false, prev.Workers[i].Incarnation
		return t, nil
	}
	// Under RecoverTasks a worker missing at the start is one lost: the
	// others take its batches until it answers and joins.
	mayMiss := job == "worker" && (known || s.rec != nil)
	st, err := c.GetStatus(ctx)
	switch {
	case err != nil:
		err = fmt.Errorf("driver: GetStatus of %s: %w", name, err)
		if perr := s.d.Probe(ctx, name); perr != nil {
			err = perr
		}
		if !mayMiss || !errors.Is(err, driver.ErrTaskLost) {
			return t, err
		}
		t.Live = false
		if known {
			t.Incarnation = prev.Workers[i].Incarnation
		}
	case len(st.GetDeviceAttributes()) == 0:
		return t, fmt.Errorf("%s reported no device", t.Device)
	default:
		t.Incarnation = st.GetDeviceAttributes()[0].GetIncarnation()
		// The graphs built now are this incarnation's: a probe that finds
		// another finds the task restarted, however fast it came back.
		s.d.ExpectIncarnation(name, t.Incarnation)
	}
	return t, nil
}

// Run trains every replica for Options.Steps steps (or to StopAtStep's
// global step) concurrently, and,
// with RecoverTasks, looks for lost workers meanwhile. It returns once
// every replica is done, or with the first error that ends the run.
func (s *Session) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	done := make(chan struct{})
	if s.rec != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.rejoin(ctx, done)
		}()
	}
	var workers sync.WaitGroup
	for r := range s.opts.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := s.train(ctx, r); err != nil {
				cancel(err)
			}
		}()
	}
	workers.Wait()
	close(done)
	wg.Wait()
	return context.Cause(ctx)
}

// Close deregisters the graphs and deletes the sessions.
func (s *Session) Close(ctx context.Context) error { return s.d.Close(ctx) }

// FailOverWorkers makes a lost worker lose only its steps in flight: the
// batches of its replica go on over another worker that answers (its
// graphs), as TensorFlow's coordinator gives a lost worker's closures to
// the others. A lost parameter server still fails the run. Call it before
// Run.
func (s *Session) FailOverWorkers() { s.failover = true }

// lostWorker reports whether err is the loss of worker w.
func lostWorker(err error, w int) bool {
	var te *driver.TaskError
	return errors.As(err, &te) && te.Task == WorkerTask(w)
}

// anyLostWorker reports whether err is the loss of a worker.
func (s *Session) anyLostWorker(err error) bool {
	for w := range s.opts.Workers {
		if lostWorker(err, w) {
			return true
		}
	}
	return false
}

// LiveReplica returns the first replica from r on whose worker no loss
// is known, or -1.
func (s *Session) LiveReplica(r int) int {
	for k := range s.opts.Workers {
		if w := (r + k) % s.opts.Workers; s.d.Lost(WorkerTask(w)) == nil {
			return w
		}
	}
	return -1
}

// afterStep runs the hooks for the step that made n steps.
func (s *Session) afterStep(ctx context.Context, n int64) error {
	for _, f := range s.hooks {
		if err := f(ctx, s.base.Load()+n); err != nil {
			return err
		}
	}
	return nil
}

// train runs replica r's steps, over worker r's graphs unless it is lost
// and failover is on. With RecoverTasks, a step that fails with a lost
// parameter server waits for the recovery and the worker goes on.
func (s *Session) train(ctx context.Context, r int) error {
	rep := s.m.Replica(r)
	defer rep.Close()
	on := r // the replica whose graphs run the steps
	if s.failover && s.d.Lost(WorkerTask(r)) != nil {
		// Missing since the start: another worker's graphs run its steps
		// until it joins.
		if on = s.LiveReplica(r); on < 0 {
			return fmt.Errorf("worker %d: no worker left: %w", r, s.d.Lost(WorkerTask(r)))
		}
	}
	tasks := append(s.PSTasks(), WorkerTask(on))
	var cleanup background
	defer cleanup.wait()
	for n := 0; s.claim(n); n++ {
		if err := rep.Next(ctx); err != nil {
			s.finish(false, 0)
			return fmt.Errorf("worker %d: %w", r, err)
		}
		gen, err := s.rec.enter()
		if err != nil {
			s.finish(false, 0)
			return fmt.Errorf("worker %d: %w", r, err)
		}
		if s.rec != nil && on != r && s.d.Lost(WorkerTask(r)) == nil {
			// Worker r rejoined.
			on, tasks = r, append(s.PSTasks(), WorkerTask(r))
		}
		step := s.NextStepID()
		s.started[r].Store(s.GlobalStep())
		loss, err := rep.Step(ctx, on, step)
		s.started[r].Store(math.MaxInt64)
		// The step's cleanup runs while the next step does, as
		// TensorFlow's master cleans partitions up asynchronously after
		// each run: one at a time, its error reported by the step after.
		// A lost task's failed cleanup is not the run's failure when the
		// job recovers from it.
		if cerr := cleanup.wait(); err == nil && !s.forgivable(cerr) {
			err = cerr
		}
		stepTasks, failedOver := tasks, err != nil && s.failover && lostWorker(err, on)
		if failedOver {
			// The parameter servers still hold the step's state.
			stepTasks = s.PSTasks()
		}
		cleanup.start(s.rec.track(func() error { return s.d.CleanupStep(ctx, step, stepTasks...) }))
		if failedOver {
			s.finish(false, 0)
			s.rec.leave()
			s.lost.Add(1)
			if s.rec != nil {
				s.rec.log("%s lost: replica %d's batches go to another worker until it answers again", WorkerTask(on), r)
			}
			if on = s.LiveReplica(on); on < 0 {
				return fmt.Errorf("worker %d: no worker left: %w", r, err)
			}
			tasks = append(s.PSTasks(), WorkerTask(on))
			continue
		}
		if err == nil {
			err = s.afterStep(ctx, s.finish(true, loss))
		} else {
			s.finish(false, 0)
			if s.rec != nil && s.lostPS(err) {
				s.lost.Add(1)
			}
		}
		s.rec.leave()
		if err != nil && s.rec != nil && s.lostPS(err) {
			if err := s.recoverFrom(ctx, gen, err); err != nil {
				return fmt.Errorf("worker %d: %w", r, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("worker %d: %w", r, err)
		}
	}
	if err := cleanup.wait(); !s.forgivable(err) {
		return fmt.Errorf("worker %d: %w", r, err)
	}
	return nil
}

// background runs one function at a time on a goroutine of its own.
type background struct {
	done chan error
	busy bool
}

// start runs f; the previous function must have been waited for.
func (b *background) start(f func() error) {
	if b.done == nil {
		b.done = make(chan error, 1)
	}
	b.busy = true
	go func() { b.done <- f() }()
}

// wait returns the error of the function started last, once it has
// ended, or nil when none runs.
func (b *background) wait() error {
	if !b.busy {
		return nil
	}
	b.busy = false
	return <-b.done
}

// Waiting returns the lost task a recovery waits for and since when, or
// "" (see RecoverTasks).
func (s *Session) Waiting() (string, time.Time) {
	if s.rec == nil {
		return "", time.Time{}
	}
	if w := s.rec.waiting.Load(); w != nil {
		return w.task, w.since
	}
	return "", time.Time{}
}
