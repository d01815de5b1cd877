package train

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/starwire/starwire/handlers"
)

// Progress is a report of a running session (see ProgressHook): where the
// run is, and what it did since the last report.
type Progress struct {
	// Elapsed is the time since Begin.
	Elapsed time.Duration
	// GlobalStep is the session's global step; Steps the run's progress,
	// the global steps since Begin, less those a recovery undid, which
	// are trained again.
	GlobalStep, Steps int64
	// Done is the steps the session has done (Session.Steps), and
	// DoneInInterval those of them done since the last report.
	Done, DoneInInterval int64
	// Interval is the time since the last report (or Begin).
	Interval time.Duration
	// Loss is the mean loss of the steps done in the interval, NaN when
	// none was.
	Loss float64
	// Calls and Bytes are the RPCs of the interval and the bytes they
	// moved, as ProgressOptions.Stats counts them.
	Calls, Bytes int64
	// Waiting, when not empty, is the lost task the session waits for
	// (see RecoverTasks), and WaitingFor how long it has waited.
	Waiting    string
	WaitingFor time.Duration
}

// PerSec returns n per second of the report's interval, 0 for an empty
// interval.
func (p Progress) PerSec(n int64) float64 {
	if p.Interval <= 0 {
		return 0
	}
	return float64(n) / p.Interval.Seconds()
}

// ProgressOptions say when a ProgressHook reports.
type ProgressOptions struct {
	// Steps and Every report every Steps global steps and every Every,
	// as TensorFlow's LoggingTensorHook does every_n_iter or every_n_secs;
	// 0 turns either off. The reports of Every come from Run, so that a
	// session paused, waiting for a lost task, still reports it.
	Steps int64
	Every time.Duration
	// Stats, when set, counts the RPCs of the run (the driver's and the
	// tasks' to each other); nil counts the session's driver's.
	Stats func() handlers.Stats
	// Now, when set, is the hook's clock; nil means time.Now.
	Now func() time.Time
}

// A ProgressHook reports a session's progress to a function: after a
// step, once the global step has moved on by Steps since the last
// report, and every Every while Run runs. Reports are made one at a time.
// Safe for concurrent use.
type ProgressHook struct {
	s      *Session
	opts   ProgressOptions
	report func(Progress)

	mu                   sync.Mutex
	start, lastAt        time.Time
	startStep, lastStep  int64
	lastDone, lastLosses int64
	lastStats            handlers.Stats
	begun                bool
}

// NewProgressHook returns the hook that reports s's progress to report
// as o says.
func NewProgressHook(s *Session, o ProgressOptions, report func(Progress)) *ProgressHook {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Stats == nil {
		o.Stats = s.Driver().Stats
	}
	return &ProgressHook{s: s, opts: o, report: report}
}

// Begin starts the run's clock and its steps at the session's global
// step now; call it before the session's Run.
func (h *ProgressHook) Begin() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start = h.opts.Now()
	h.lastAt = h.start
	h.startStep = h.s.GlobalStep()
	h.lastStep = h.startStep
	h.lastDone, _ = h.s.Steps()
	h.lastLosses = h.lastDone
	h.lastStats = h.opts.Stats()
	h.begun = true
}

// AfterStep reports when Steps global steps have passed since the last
// report; for Session.AfterStep.
func (h *ProgressHook) AfterStep(_ context.Context, step int64) error {
	if h.opts.Steps <= 0 {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.begun && step >= h.lastStep+h.opts.Steps {
		h.reportLocked(step)
	}
	return nil
}

// Run reports every Every until ctx ends; it returns at once when Every
// is 0.
func (h *ProgressHook) Run(ctx context.Context) {
	if h.opts.Every <= 0 {
		return
	}
	t := time.NewTicker(h.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Report()
		}
	}
}

// Report reports now.
func (h *ProgressHook) Report() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.begun {
		h.reportLocked(h.s.GlobalStep())
	}
}

// reportLocked reports the interval that ends at global step step; h.mu
// is held.
func (h *ProgressHook) reportLocked(step int64) {
	now := h.opts.Now()
	done, _ := h.s.Steps()
	recent := h.s.Losses(int(h.lastLosses))
	st := h.opts.Stats()
	p := Progress{
		Elapsed:    now.Sub(h.start),
		GlobalStep: step, Steps: max(step-h.startStep, 0),
		Done: done, DoneInInterval: done - h.lastDone,
		Interval: now.Sub(h.lastAt),
		Loss:     mean(recent),
		Calls:    st.Calls - h.lastStats.Calls, Bytes: st.Bytes - h.lastStats.Bytes,
	}
	if task, since := h.s.Waiting(); task != "" {
		p.Waiting, p.WaitingFor = task, now.Sub(since)
	}
	h.lastAt, h.lastStep, h.lastDone, h.lastStats = now, step, done, st
	h.lastLosses += int64(len(recent))
	h.report(p)
}

// mean returns the mean of v, NaN when v is empty.
func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
