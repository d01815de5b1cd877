package handlers

import (
	"sync"
	"time"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// maxLoggedSteps bounds the step stats kept for Logging, oldest dropped
// first, so a master that never fetches them cannot exhaust memory.
const maxLoggedSteps = 1024

// stepStatsLog keeps per-node timings of the steps run while RPC logging is
// on (Logging enable_rpc_logging) or a trace is running (Tracing with a
// duration). Logging fetches and clears them.
type stepStatsLog struct {
	mu         sync.Mutex
	enabled    bool
	traceUntil time.Time
	steps      map[int64]*tfpb.StepStats
	order      []int64
}

func newStepStatsLog() *stepStatsLog {
	return &stepStatsLog{steps: make(map[int64]*tfpb.StepStats)}
}

// recording reports whether steps starting now should be timed.
func (l *stepStatsLog) recording() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enabled || time.Now().Before(l.traceUntil)
}

func (l *stepStatsLog) record(step int64, stats *tfpb.StepStats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.steps[step]; !ok {
		l.order = append(l.order, step)
	}
	l.steps[step] = stats
	for len(l.order) > maxLoggedSteps {
		delete(l.steps, l.order[0])
		l.order = l.order[1:]
	}
}

// logging serves Logging: it switches recording on or off, clears what was
// kept, and returns (and forgets) the stats of the steps asked for.
func (w *Worker) logging(req *tfpb.LoggingRequest) *tfpb.LoggingResponse {
	l := w.stats
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case req.GetEnableRpcLogging():
		l.enabled = true
	case req.GetDisableRpcLogging():
		l.enabled = false
	}
	resp := &tfpb.LoggingResponse{}
	for _, step := range req.GetFetchStepId() {
		if st, ok := l.steps[step]; ok {
			resp.Step = append(resp.Step, &tfpb.LabeledStepStats{StepId: step, StepStats: st})
			delete(l.steps, step)
		}
	}
	if req.GetClear() {
		clear(l.steps)
	}
	kept := l.order[:0]
	for _, step := range l.order {
		if _, ok := l.steps[step]; ok {
			kept = append(kept, step)
		}
	}
	l.order = kept
	return resp
}

// tracing serves Tracing: a trace records step stats, fetched with Logging,
// for the requested duration in seconds.
func (w *Worker) tracing(req *tfpb.TracingRequest) (*tfpb.TracingResponse, error) {
	d := req.GetOptions().GetDuration()
	if d <= 0 || d > 24*3600 {
		return nil, status.Errorf(wire.InvalidArgument, "Tracing: duration %gs is not in (0, 86400]", d)
	}
	w.stats.mu.Lock()
	w.stats.traceUntil = time.Now().Add(time.Duration(d * float64(time.Second)))
	w.stats.mu.Unlock()
	return &tfpb.TracingResponse{}, nil
}
