package train

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Rejoiner finds lost tasks again, for RecoverTasks.
type Rejoiner interface {
	// Find tries once to reach task: it looks the task's address up
	// again (a registry may give a new one), points the driver's Caller
	// at it, and returns nil once the task answers. addr is the address
	// tried, for the error of a wait that gives up.
	Find(ctx context.Context, task string) (addr string, err error)
	// ServerDef is the cluster as now known, sent with the sessions
	// created again so that the tasks reach a peer that moved; nil sends
	// none.
	ServerDef() *tfpb.ServerDef
}

// RecoverOptions say how a job recovers from a lost task.
type RecoverOptions struct {
	Rejoin Rejoiner
	// Timeout bounds the wait for a lost parameter server; 0 means 10
	// minutes.
	Timeout time.Duration
	// Every is the interval between attempts to reach a lost task; 0
	// means 200ms.
	Every time.Duration
	// Restore, when set, restores every parameter server once all are
	// initialized again and returns the global step restored; an error
	// wrapping checkpoint.ErrNoCheckpoint, or no Restore, starts the model
	// again from step 0.
	Restore func(ctx context.Context) (globalStep int64, err error)
	// Log, when set, is told what recovery does, one line at a time.
	Log func(msg string)
}

// recovery is the state of RecoverTasks.
//
// Every training step holds gate shared; a recovery holds it alone, so
// that it re-registers the graphs while no step runs. gen counts the
// recoveries: the workers whose steps failed with the same loss all ask
// for a recovery, and only the first of the generation makes it.
type recovery struct {
	opts RecoverOptions
	gate sync.RWMutex
	gen  int   // guarded by gate
	err  error // a failed recovery's, guarded by gate; ends every worker

	undone  atomic.Int64 // global steps undone by restores
	waiting atomic.Pointer[waitState]

	// cleanups counts the steps' cleanups in flight (see track): they run
	// on after their step has left gate, so holding gate alone does not
	// wait for them.
	cleanups sync.WaitGroup

	// reinit says that a parameter server restarted and the servers are
	// not yet initialized and restored since: an attempt that fails after
	// build has already recorded the new incarnation, so the retry cannot
	// tell the restart from the incarnations alone. Guarded by gate.
	reinit bool
	// restartedPS names the parameter servers that restarted since the
	// servers were last initialized and restored. Guarded by gate.
	restartedPS []string

	// finding is held, a one-slot semaphore, while a lost worker is looked
	// for and revived. rejoin looks for one without the gate, so that the
	// steps go on meanwhile; a recovery that revived the worker between
	// rejoin's check that it is lost and its Find would have Find replace,
	// and close, the Caller that the rebuilt graphs and the steps then use.
	// A recovery so waits out at most one attempt of Find, which the
	// Rejoiner bounds. A channel, not a mutex: a recovery waiting for it
	// is durably blocked, which testing/synctest can wait for.
	finding chan struct{}
}

// waitState is what a recovery waits for, for the progress reports.
type waitState struct {
	task  string
	since time.Time
}

// RecoverTasks makes a lost parameter server cost steps, not the job:
// every worker pauses while the job waits, up to o.Timeout, for the
// server to answer again, at its address or a new one; then the job
// creates again the sessions and graphs the restarted task lost, sets
// every parameter server's variables afresh and restores them all from
// the newest checkpoint (o.Restore), so that the model is consistent,
// and the steps go on from its global step. A lost worker is tried
// again every o.Every while the others take its batches (see
// FailOverWorkers, which it turns on); once it answers it rejoins, its
// graphs registered again, and runs its replica's steps again. Call it
// before Run.
func (s *Session) RecoverTasks(o RecoverOptions) {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Every <= 0 {
		o.Every = 200 * time.Millisecond
	}
	s.failover = true
	s.rec = &recovery{opts: o, finding: make(chan struct{}, 1)}
}

// enter starts a step: it holds the gate shared and returns the
// recovery generation, or the error of a failed recovery.
func (rec *recovery) enter() (int, error) {
	if rec == nil {
		return 0, nil
	}
	rec.gate.RLock()
	if rec.err != nil {
		err := rec.err
		rec.gate.RUnlock()
		return 0, err
	}
	return rec.gen, nil
}

// track returns f, the cleanup of a step, counted among those a recovery
// waits for. The step must still hold the gate shared, so that a
// recovery, which holds it alone, finds every cleanup started.
func (rec *recovery) track(f func() error) func() error {
	if rec == nil {
		return f
	}
	rec.cleanups.Add(1)
	return func() error {
		defer rec.cleanups.Done()
		return f()
	}
}

// lockFinding takes rec.finding, unless ctx ends first.
func (rec *recovery) lockFinding(ctx context.Context) error {
	select {
	case rec.finding <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (rec *recovery) unlockFinding() { <-rec.finding }

// leave ends what enter started.
func (rec *recovery) leave() {
	if rec != nil {
		rec.gate.RUnlock()
	}
}

func (rec *recovery) log(format string, args ...any) {
	if rec.opts.Log != nil {
		rec.opts.Log(fmt.Sprintf(format, args...))
	}
}

// lostPS reports whether err is the loss of a parameter server, or the
// answer of one that restarted (its sessions gone: Aborted).
func (s *Session) lostPS(err error) bool {
	var te *driver.TaskError
	if errors.As(err, &te) {
		return slices.Contains(s.PSTasks(), te.Task)
	}
	return err != nil && rpc.CodeOf(err) == wire.Aborted
}

// forgivable reports whether err, a failed cleanup's, is one the job
// recovers from: the loss of a worker (with failover) or of any task
// (with recovery).
func (s *Session) forgivable(err error) bool {
	if err == nil {
		return true
	}
	if s.rec != nil {
		return errors.Is(err, driver.ErrTaskLost) || rpc.CodeOf(err) == wire.Aborted
	}
	return s.failover && s.anyLostWorker(err)
}

// recoverFrom recovers from cause, met by a step of generation gen,
// unless another worker did already.
func (s *Session) recoverFrom(ctx context.Context, gen int, cause error) error {
	rec := s.rec
	rec.gate.Lock()
	defer rec.gate.Unlock()
	if rec.err != nil {
		return rec.err
	}
	if rec.gen != gen {
		return nil
	}
	rec.log("%v: pausing the workers", shortCause(cause))
	if err := s.recover(ctx, true); err != nil {
		rec.err = err
		return err
	}
	rec.gen++
	return nil
}

// shortCause says what a step met: its error, where a lost task failed
// it (a *driver.StepError) the loss alone, without the failed call's own
// error, which the loss explains.
func shortCause(err error) string {
	s := err.Error()
	var se *driver.StepError
	if errors.As(err, &se) {
		s = strings.Replace(s, se.Error(), se.Lost.Error(), 1)
	}
	return s
}

// recover brings the job back, every step paused: it waits for every lost
// parameter server (when wait), tries each lost worker once, registers
// the graphs again on the tasks that answer and, when a parameter server
// restarted, initializes and restores them all.
func (s *Session) recover(ctx context.Context, wait bool) error {
	rec := s.rec
	// A step's cleanup, which runs on after the step, may still be calling
	// the lost task on the Caller that Find replaces and closes. Cut off,
	// the call fails with "client closed" rather than the task's loss,
	// unless the driver's cancellation for the loss, delivered on a
	// goroutine of its own, got there first; and that error ends the run
	// (see forgivable). The cleanups end soon: the loss cancels their
	// calls to the lost task, and live tasks answer. No step runs while
	// the gate is held alone, so no cleanup starts meanwhile.
	rec.cleanups.Wait()
	deadline := time.Now().Add(rec.opts.Timeout)
	for {
		if wait {
			for _, task := range s.PSTasks() {
				if s.d.Lost(task) != nil {
					if err := s.await(ctx, task, deadline); err != nil {
						return err
					}
				}
			}
		}
		if err := rec.lockFinding(ctx); err != nil {
			return fmt.Errorf("recover: waiting to look for the lost workers: %w", err)
		}
		for w := range s.opts.Workers {
			if task := WorkerTask(w); s.d.Lost(task) != nil {
				if _, err := rec.opts.Rejoin.Find(ctx, task); err == nil {
					s.d.Revive(task)
					rec.log("%s answers again: it rejoins", task)
				}
			}
		}
		rec.unlockFinding()
		err := s.rebuild(ctx)
		if err == nil {
			return nil
		}
		// A task lost meanwhile: wait for it too, within the same bound.
		if !errors.Is(err, driver.ErrTaskLost) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("recover: %w", err)
		}
		rec.log("%v: recovering again", shortCause(err))
		wait = true
	}
}

// await tries to reach task every rec.opts.Every until it answers or the
// deadline passes, and revives it.
func (s *Session) await(ctx context.Context, task string, deadline time.Time) error {
	rec := s.rec
	start := time.Now()
	rec.waiting.Store(&waitState{task: task, since: start})
	defer rec.waiting.Store(nil)
	rec.log("waiting up to %v for %s", time.Until(deadline).Round(time.Second), task)
	var tried []string
	var last error
	t := time.NewTicker(rec.opts.Every)
	defer t.Stop()
	for {
		addr, err := rec.opts.Rejoin.Find(ctx, task)
		if addr != "" && !slices.Contains(tried, addr) {
			tried = append(tried, addr)
		}
		if err == nil {
			s.d.Revive(task)
			rec.log("%s answers again at %s after %.1f s", task, addr, time.Since(start).Seconds())
			return nil
		}
		last = err
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s lost and not back after %v (tried %s): %w", task, time.Since(start).Round(time.Millisecond), strings.Join(tried, ", "), last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", task, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// rebuild registers every graph again after tasks restarted, and when a
// parameter server did (a new incarnation, now or in an attempt that
// failed after build), sets every server's variables afresh and restores
// them.
func (s *Session) rebuild(ctx context.Context) error {
	rec := s.rec
	oldPS := incarnations(s.tasks.PS)
	if err := s.build(ctx, rec.opts.Rejoin.ServerDef()); err != nil {
		return err
	}
	if !slices.Equal(oldPS, incarnations(s.tasks.PS)) {
		rec.reinit = true
		for _, t := range restarted(s.tasks.PS, oldPS) {
			if !slices.Contains(rec.restartedPS, t) {
				rec.restartedPS = append(rec.restartedPS, t)
			}
		}
	}
	if !rec.reinit {
		return nil
	}
	before := s.GlobalStep()
	if err := s.m.Initialize(ctx); err != nil {
		return err
	}
	var step int64
	var err error
	if rec.opts.Restore != nil {
		step, err = rec.opts.Restore(ctx)
	} else {
		err = checkpoint.ErrNoCheckpoint
	}
	switch {
	case errors.Is(err, checkpoint.ErrNoCheckpoint):
		s.SetGlobalStep(0)
		why := ""
		if rec.opts.Restore != nil {
			why = " (" + err.Error() + ")"
		}
		rec.log("warning: no checkpoint to restore%s: %s", why, s.afresh(rec.restartedPS))
	case err != nil:
		return err
	default:
		s.SetGlobalStep(step)
	}
	if n := before - s.GlobalStep(); n > 0 {
		rec.undone.Add(n)
	}
	rec.reinit, rec.restartedPS = false, nil
	return nil
}

// afresh says what a restart with no checkpoint to restore leaves of the
// model, the servers of restartedPS having restarted: all of it afresh,
// or, for a model whose Initialize keeps what a server has, the
// restarted servers' variables alone.
func (s *Session) afresh(restartedPS []string) string {
	if k, ok := s.m.(KeepingInitializer); !ok || !k.InitializeKeeps() || len(restartedPS) == 0 || len(restartedPS) == len(s.tasks.PS) {
		return "every parameter server starts afresh, and the model from step 0"
	}
	slices.Sort(restartedPS)
	verb := "start"
	if len(restartedPS) == 1 {
		verb = "starts"
	}
	return fmt.Sprintf("%s restarted and %s afresh, the other parameter servers keep their variables as they are, and the global step starts from 0",
		strings.Join(restartedPS, ", "), verb)
}

// rejoin tries the lost workers every rec.opts.Every until done is
// closed, and has one that answers rejoin.
func (s *Session) rejoin(ctx context.Context, done <-chan struct{}) {
	rec := s.rec
	t := time.NewTicker(rec.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for w := range s.opts.Workers {
			task := WorkerTask(w)
			if s.d.Lost(task) == nil {
				continue
			}
			if !s.findLost(ctx, task) {
				continue
			}
			rec.gate.Lock()
			// A recovery that ran since revived the worker and registered
			// its graphs.
			if rec.err == nil && s.d.Lost(task) != nil {
				if err := s.recover(ctx, false); err != nil {
					rec.err = err
				}
				rec.gen++
			}
			rec.gate.Unlock()
			break
		}
	}
}

// findLost looks for worker task once, if it is still lost, and reports
// whether it answers. It holds rec.finding, so that no recovery revives
// the worker while Find points its Caller elsewhere.
func (s *Session) findLost(ctx context.Context, task string) bool {
	rec := s.rec
	if rec.lockFinding(ctx) != nil {
		return false
	}
	defer rec.unlockFinding()
	if s.d.Lost(task) == nil {
		return false
	}
	_, err := rec.opts.Rejoin.Find(ctx, task)
	return err == nil
}
