package driver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/starwire/starwire/wire/tfpb"
)

// ErrTaskLost is wrapped by the error of a step that failed because a task
// died or stopped answering (see Watch).
var ErrTaskLost = errors.New("task lost")

// ErrRestarted is wrapped by the *TaskError of a task that answers a
// probe with another incarnation than the one expected (see
// ExpectIncarnation): it restarted, its sessions, graphs and variables
// gone, faster than a probe found it not answering.
var ErrRestarted = errors.New("restarted")

// A TaskError says which task was lost and why.
type TaskError struct {
	Task string
	Err  error
}

func (e *TaskError) Error() string { return fmt.Sprintf("%s lost: %v", e.Task, e.Err) }

// Unwrap lets errors.Is find ErrTaskLost and the cause.
func (e *TaskError) Unwrap() []error { return []error{ErrTaskLost, e.Err} }

// A StepError is the error of a step that failed because a task was
// lost: Lost says which and why, Err is what the step's call returned (a
// cancellation, a reset connection), which the loss explains. errors.As
// finds Lost through it; Err is kept for the message, not unwrapped, so
// that a caller branches on the loss and not on its symptom.
type StepError struct {
	Lost *TaskError
	Err  error
}

func (e *StepError) Error() string { return fmt.Sprintf("%v (the step failed: %v)", e.Lost, e.Err) }

// Unwrap returns the loss.
func (e *StepError) Unwrap() error { return e.Lost }

// health tracks which tasks answer. Each task has a context that is
// cancelled, with a *TaskError as its cause, when the task is found lost:
// the calls of steps that involve it are tied to it, so that a step waiting
// on a dead or frozen task (or on a peer waiting for it) ends within the
// probe's bound instead of never.
type health struct {
	timeout time.Duration // 0: not watching

	mu    sync.Mutex
	tasks map[string]*taskHealth
	stop  chan struct{}
	done  chan struct{}

	// afterFunc, when set (by a test, before Watch), stands for
	// context.AfterFunc in tie: a test holds back the loss's delivery to a
	// step's calls, as a loaded machine may.
	afterFunc func(context.Context, func()) func() bool
	// probing, when set (by a test, before Watch), is called by probe
	// between its reads of a task's state and of its Caller: a test
	// revives the task there.
	probing func(task string)
}

type taskHealth struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   *TaskError // nil while it answers
	// incarnation is the one expected (ExpectIncarnation), 0 for none;
	// restartedTo is the one a probe found instead, which lost says.
	incarnation, restartedTo uint64
}

func newTaskHealth() *taskHealth {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &taskHealth{ctx: ctx, cancel: cancel}
}

// Watch makes the driver probe every task (GetStatus) every timeout/3,
// each probe bounded by timeout/2, so that a task that dies or stops
// answering fails the steps that involve it within about timeout: a
// connection reset fails a call at once, but a task that is stopped
// (SIGSTOP, a frozen host) leaves its calls waiting, and a step's other
// partitions wait for the tensors it would have sent. A step that fails
// is also checked at once: when one of its tasks does not answer a probe,
// the step's error is that task's *TaskError. Call it once, before the
// steps; Close stops it.
func (d *Driver) Watch(timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	h := &d.health
	h.mu.Lock()
	if h.timeout != 0 {
		h.mu.Unlock()
		return
	}
	h.timeout = timeout
	stop, done := make(chan struct{}), make(chan struct{})
	h.stop, h.done = stop, done
	h.mu.Unlock()
	go d.watch(stop, done)
}

func (d *Driver) watch(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	// Stopping cancels a probe in flight: Close need not wait out a
	// frozen task's probe.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(d.health.timeout / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d.probe(ctx, d.order...)
		}
	}
}

// Probe asks tasks for their status, as the watch does (see Watch), and
// returns the *TaskError of the first that does not answer, or answers
// restarted (see ExpectIncarnation), now marked lost; nil when all answer
// or the driver is not watching.
func (d *Driver) Probe(ctx context.Context, tasks ...string) error {
	if d.health.timeout == 0 {
		return nil
	}
	return d.probe(ctx, tasks...)
}

// probe asks tasks for their status, each bounded by the probe timeout,
// marks those that do not answer, or answer restarted, as lost, and
// returns the first of them as a *TaskError (nil when all answer).
func (d *Driver) probe(ctx context.Context, tasks ...string) error {
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		// A probe that fails after the task was revived (it started
		// before) says nothing of the task as it is now. Its state is
		// read before its Caller: a restarted task's Caller is replaced
		// before it is revived (Replace, then Revive), so a probe on a
		// Caller replaced since, which fails ("client closed"), holds
		// the state from before the revival, which markLost ignores.
		// Read the other way round, a revival between the two reads
		// would have that failure mark the revived task lost.
		th := d.taskHealth(task)
		if d.health.probing != nil {
			d.health.probing(task)
		}
		c, err := d.Caller(task)
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, d.health.timeout/2)
			st, err := c.GetStatus(pctx)
			cancel()
			if err == nil {
				if te := d.checkIncarnation(task, th, st); te != nil {
					errs[i] = te
				}
				return
			}
			if ctx.Err() == nil {
				if errors.Is(pctx.Err(), context.DeadlineExceeded) {
					err = fmt.Errorf("no answer to a status probe in %v: %w", d.health.timeout/2, err)
				}
				if te := d.markLost(task, th, err); te != nil {
					errs[i] = te
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ExpectIncarnation records that the caller's sessions and graphs on
// task are those of its incarnation inc (GetStatus's): a probe that finds
// another incarnation finds the task restarted, and so lost, with an
// error wrapping ErrRestarted, even though it answers. A task found lost
// because it restarted to inc is revived: the caller builds for the
// restarted task (see Revive), whose Caller reached it. inc 0 expects
// none.
func (d *Driver) ExpectIncarnation(task string, inc uint64) {
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	th := h.taskLocked(task)
	if th.lost != nil {
		if th.restartedTo == 0 || th.restartedTo != inc {
			return
		}
		th = newTaskHealth()
		h.tasks[task] = th
	}
	th.incarnation = inc
}

// checkIncarnation marks task lost, restarted, when st, its answer to a
// probe, has another incarnation than the one expected of th, its state
// when the probe began; it returns the task's *TaskError (the first cause
// found), nil when the task did not restart or was revived since.
func (d *Driver) checkIncarnation(task string, th *taskHealth, st *tfpb.GetStatusResponse) *TaskError {
	devs := st.GetDeviceAttributes()
	if len(devs) == 0 {
		return nil
	}
	inc := devs[0].GetIncarnation()
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taskLocked(task) != th || th.incarnation == 0 || th.incarnation == inc {
		return nil
	}
	// Lost already (another probe found the restart, or the task's
	// silence before it): the loss first found is the task's.
	if th.lost == nil {
		th.restartedTo = inc
		th.lost = &TaskError{Task: task, Err: fmt.Errorf("%w: incarnation %#x, was %#x", ErrRestarted, inc, th.incarnation)}
		th.cancel(th.lost)
	}
	return th.lost
}

// markLost records task as lost, unless it was revived since th was its
// state, and cancels the calls of steps that involve it; it returns the
// task's *TaskError (the first cause found), nil when it was revived.
func (d *Driver) markLost(task string, th *taskHealth, err error) *TaskError {
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taskLocked(task) != th {
		return nil
	}
	if th.lost == nil {
		th.lost = &TaskError{Task: task, Err: err}
		th.cancel(th.lost)
	}
	return th.lost
}

func (h *health) taskLocked(task string) *taskHealth {
	if h.tasks == nil {
		h.tasks = make(map[string]*taskHealth)
	}
	th := h.tasks[task]
	if th == nil {
		th = newTaskHealth()
		h.tasks[task] = th
	}
	return th
}

// taskHealth returns task's current state, replaced when it is revived.
func (d *Driver) taskHealth(task string) *taskHealth {
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.taskLocked(task)
}

// Lost returns the error of task when it was found lost and not revived
// since, else nil.
func (d *Driver) Lost(task string) *TaskError {
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if th := h.tasks[task]; th != nil {
		return th.lost
	}
	return nil
}

// Revive forgets that task was lost, once it answers again (a restarted
// task: its sessions and graphs are new, see CreateSession and
// RegisterGraph), so that steps may involve it again. A restarted task's
// new Caller must be in place (Replace) before it is revived: a probe
// still on the old one is then not taken for the revived task's loss.
func (d *Driver) Revive(task string) {
	h := &d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if th := h.tasks[task]; th != nil && th.lost != nil {
		h.tasks[task] = newTaskHealth()
	}
}

// tie makes ctx's calls end when one of tasks is found lost, with that
// task's *TaskError as the cause; stop undoes it. It also returns the
// ties it made, whose lostOf says whether a task was lost since.
func (d *Driver) tie(ctx context.Context, tasks ...string) (context.Context, ties, func()) {
	if d.health.timeout == 0 {
		return ctx, nil, func() {}
	}
	afterFunc := d.health.afterFunc
	if afterFunc == nil {
		afterFunc = context.AfterFunc
	}
	ctx, cancel := context.WithCancelCause(ctx)
	ts := make(ties, len(tasks))
	for i, task := range tasks {
		th := d.taskHealth(task)
		ts[i] = tied{th, afterFunc(th.ctx, func() { cancel(context.Cause(th.ctx)) })}
	}
	return ctx, ts, func() {
		for _, t := range ts {
			t.stop()
		}
		cancel(nil)
	}
}

// A tied is a task's state as tie found it, and the stop of its tie.
type tied struct {
	th   *taskHealth
	stop func() bool
}

type ties []tied

// lostOf returns the *TaskError of the first task of ts found lost since
// it was tied, revived or not; nil when none was. markLost cancels the
// state's context with it at once, under the health lock; only its
// delivery to the tied context waits for a goroutine.
func (ts ties) lostOf() *TaskError {
	for _, t := range ts {
		if te, ok := context.Cause(t.th.ctx).(*TaskError); ok {
			return te
		}
	}
	return nil
}

// diagnose turns a failed step's error into the *TaskError of a task of
// the step that no longer answers, if one does not; else err is returned.
func (d *Driver) diagnose(ctx context.Context, err error, tasks ...string) error {
	if err == nil || d.health.timeout == 0 || ctx.Err() != nil {
		return err
	}
	var te *TaskError
	if errors.As(err, &te) {
		return err
	}
	if perr := d.probe(ctx, tasks...); perr != nil {
		return stepError(perr, err)
	}
	return err
}

// stopWatch ends the probes.
func (d *Driver) stopWatch() {
	h := &d.health
	h.mu.Lock()
	stop, done := h.stop, h.done
	h.stop = nil
	h.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// stepError returns the error of a step that failed with err because of
// lost, a *TaskError (or an error wrapping one, returned as is otherwise).
func stepError(lost, err error) error {
	if te, ok := lost.(*TaskError); ok {
		return &StepError{Lost: te, Err: err}
	}
	return fmt.Errorf("%w (the step failed: %v)", lost, err)
}
