package compute

import (
	"runtime"
	"sync/atomic"
)

// A Limit lets at most n goroutines hold one of its tokens at once. A nil
// *Limit has no bound: Acquire and Release do nothing.
type Limit struct {
	tokens  chan struct{}
	waiting atomic.Int32
}

// New returns a Limit of n tokens, at least one.
func New(n int) *Limit {
	n = max(n, 1)
	l := &Limit{tokens: make(chan struct{}, n)}
	for range n {
		l.tokens <- struct{}{}
	}
	return l
}

// Process is the process-wide Limit: one token per CPU this process may
// run on (its affinity mask, as runtime.NumCPU reads it at start), or per
// P when the runtime started with fewer Ps than that (GOMAXPROCS set, or a
// cgroup's CPU quota). It is taken before any caller raises GOMAXPROCS, so
// a spare P stays spare.
var Process = New(min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))

// Acquire waits for a token. Waiters are served in turn.
func (l *Limit) Acquire() {
	if l == nil {
		return
	}
	select {
	case <-l.tokens:
		return
	default:
	}
	l.waiting.Add(1)
	<-l.tokens
	l.waiting.Add(-1)
}

// Release gives back a token taken by Acquire. The next waiter, if any,
// gets it.
func (l *Limit) Release() {
	if l == nil {
		return
	}
	l.tokens <- struct{}{}
}

// Yield gives the token back and takes one again, so that a goroutine
// that computes for long lets each waiter compute in turn, and lets the
// goroutines its P has queued run.
func (l *Limit) Yield() {
	if l == nil {
		runtime.Gosched()
		return
	}
	l.Release()
	runtime.Gosched()
	l.Acquire()
}

// Cap returns how many tokens l has.
func (l *Limit) Cap() int {
	if l == nil {
		return 0
	}
	return cap(l.tokens)
}

// Held returns how many tokens are taken now.
func (l *Limit) Held() int {
	if l == nil {
		return 0
	}
	return cap(l.tokens) - len(l.tokens)
}

// Waiting returns how many goroutines wait in Acquire now.
func (l *Limit) Waiting() int {
	if l == nil {
		return 0
	}
	return int(l.waiting.Load())
}
