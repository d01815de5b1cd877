package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds, from 100ns to a minute, to three
// significant digits.
const (
	histMin    = 100
	histMax    = int64(time.Minute)
	histDigits = 3
	histShards = 8 // callers share this many histograms, each under a lock
)

// shardedHist spreads recording over a few HdrHistograms so that callers
// rarely wait for each other's lock, and merges them at the end.
type shardedHist struct {
	shards [histShards]struct {
		mu sync.Mutex
		h  *hdrhistogram.Histogram
	}
}

func newShardedHist() *shardedHist {
	s := &shardedHist{}
	for i := range s.shards {
		s.shards[i].h = hdrhistogram.New(histMin, histMax, histDigits)
	}
	return s
}

func (s *shardedHist) record(shard int, d time.Duration) {
	sh := &s.shards[shard%histShards]
	sh.mu.Lock()
	sh.h.RecordValue(min(max(int64(d), histMin), histMax))
	sh.mu.Unlock()
}

func (s *shardedHist) merged() *hdrhistogram.Histogram {
	h := hdrhistogram.New(histMin, histMax, histDigits)
	for i := range s.shards {
		h.Merge(s.shards[i].h)
	}
	return h
}

// driveResult is what one measurement of one point counted.
type driveResult struct {
	calls, errors int64
	elapsed       time.Duration
	hist          *hdrhistogram.Histogram
	// late, in an open loop, is how late callers that slept until a call
	// was due woke past it: what the client machine, not the server, added
	// to the latencies (nil in a closed loop).
	late     *hdrhistogram.Histogram
	firstErr error
}

// driveClosed runs one goroutine per caller, each calling again as soon as
// its call returns, for d (and at least once).
func driveClosed(ctx context.Context, callers []caller, d time.Duration) driveResult {
	h := newShardedHist()
	var calls, errs atomic.Int64
	var first atomic.Pointer[error]
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every caller makes at least one call, however late a loaded
			// machine runs it, so that every point measures something.
			for once := true; ctx.Err() == nil; once = false {
				t0 := time.Now()
				if !once && !t0.Before(deadline) {
					return
				}
				if err := call(ctx); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, &err)
					return // a failing caller stops; the point reports the error
				}
				h.record(i, time.Since(t0))
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	r := driveResult{calls: calls.Load(), errors: errs.Load(), elapsed: time.Since(start), hist: h.merged()}
	if e := first.Load(); e != nil {
		r.firstErr = *e
	}
	return r
}

// driveOpen issues calls at a fixed rate for d, whatever the answers take:
// call i is due at start+i/rate, and its latency counts from then, not from
// when a caller got to it, so queueing behind slow answers shows in the
// latencies instead of slowing the arrivals (coordinated omission). The
// callers bound the calls in flight; calls due while all are busy wait.
//
// A caller that slept until its call was due counts from when it woke
// instead, and records how late that was apart (driveResult.late): an
// idle Go process's timers fire up to a millisecond late (the netpoller
// sleeps whole milliseconds), which is the client's lateness, not the
// server's (starwire bench --peers reports it: "late p50/p99").
func driveOpen(ctx context.Context, callers []caller, d time.Duration, rate float64) driveResult {
	h, late := newShardedHist(), newShardedHist()
	var calls, errs atomic.Int64
	var next atomic.Int64
	var first atomic.Pointer[error]
	interval := time.Duration(float64(time.Second) / rate)
	total := int64(d / interval)
	start := time.Now()
	var wg sync.WaitGroup
	for i, call := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := next.Add(1) - 1
				if n >= total {
					return
				}
				due := start.Add(time.Duration(n) * interval)
				from := due
				if wait := time.Until(due); wait > 0 {
					time.Sleep(wait)
					from = time.Now()
					late.record(i, from.Sub(due))
				}
				if err := call(ctx); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, &err)
					return // a failing caller stops; the point reports the error
				}
				h.record(i, time.Since(from))
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	r := driveResult{calls: calls.Load(), errors: errs.Load(), elapsed: time.Since(start), hist: h.merged(), late: late.merged()}
	if e := first.Load(); e != nil {
		r.firstErr = *e
	}
	return r
}
