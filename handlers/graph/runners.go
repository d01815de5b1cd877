package graph

import (
	"slices"
	"sync"
	"time"
)

// Asynchronous nodes (a remote _Recv, one that waits for another node's
// send) run on goroutines kept from one step to the next: a goroutine
// started for each such node grew a fresh stack to the depth of an RPC on
// every step, and copying stacks was a few percent of a training job's
// CPU. A runner that has been idle for runnerIdle ends, so that a graph
// that stops running leaves none behind for long.
const (
	runnerIdle     = 20 * time.Millisecond
	maxIdleRunners = 256
)

type runner struct {
	work chan func()
}

var runners struct {
	mu   sync.Mutex
	idle []*runner
}

// goAsync runs f on an idle runner, or on a new one.
func goAsync(f func()) {
	runners.mu.Lock()
	if n := len(runners.idle); n > 0 {
		r := runners.idle[n-1]
		runners.idle[n-1] = nil
		runners.idle = runners.idle[:n-1]
		runners.mu.Unlock()
		r.work <- f
		return
	}
	runners.mu.Unlock()
	r := &runner{work: make(chan func(), 1)}
	go r.loop(f)
}

func (r *runner) loop(f func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil
		if !r.park() {
			return
		}
		idle.Reset(runnerIdle)
		select {
		case f = <-r.work:
		case <-idle.C:
			if !r.leave() {
				// Taken as the timer fired: its work is on the way.
				f = <-r.work
			} else {
				return
			}
		}
	}
}

// park offers r for the next node; false means there are runners enough.
func (r *runner) park() bool {
	runners.mu.Lock()
	defer runners.mu.Unlock()
	if len(runners.idle) >= maxIdleRunners {
		return false
	}
	runners.idle = append(runners.idle, r)
	return true
}

// leave takes an idle r out of the idle list; false means someone took it
// for a node first.
func (r *runner) leave() bool {
	runners.mu.Lock()
	defer runners.mu.Unlock()
	if i := slices.Index(runners.idle, r); i >= 0 {
		runners.idle = slices.Delete(runners.idle, i, i+1)
		return true
	}
	return false
}
