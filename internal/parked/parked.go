// Package parked runs jobs on goroutines kept parked between them: a
// goroutine started for each job allocates its closure and grows a fresh
// stack every time, which on a hot path (a server's calls, a graph's
// asynchronous nodes) costs more than handing the job to one that waits.
package parked

import (
	"slices"
	"sync"
	"time"
)

// A Pool runs each job given to Go on a parked goroutine, or on a new one
// when none is parked. A burst starts as many as it needs; afterwards up
// to Max stay parked, each until Idle has passed without a job (when Idle
// is set) or Close. Set Run, Max and Idle before the first Go.
type Pool[J any] struct {
	Run  func(J)       // runs one job
	Max  int           // parked goroutines kept at most
	Idle time.Duration // how long a parked goroutine waits for a job before it ends; 0 is until Close

	mu     sync.Mutex
	idle   []*goroutine[J]
	closed bool
}

type goroutine[J any] struct{ jobs chan J }

// Go runs j on a parked goroutine, or on a new one.
func (p *Pool[J]) Go(j J) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		g := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		g.jobs <- j
		return
	}
	p.mu.Unlock()
	g := &goroutine[J]{jobs: make(chan J, 1)}
	go g.loop(p, j)
}

// Close ends the parked goroutines; busy ones end after their job, and
// later jobs each run on a goroutine that then ends.
func (p *Pool[J]) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for i, g := range p.idle {
		close(g.jobs)
		p.idle[i] = nil
	}
	p.idle = nil
}

// Parked returns how many goroutines wait for a job.
func (p *Pool[J]) Parked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

func (g *goroutine[J]) loop(p *Pool[J], j J) {
	var t *time.Timer
	if p.Idle > 0 {
		t = time.NewTimer(p.Idle)
		defer t.Stop()
	}
	for ok := true; ok; j, ok = g.wait(p, t) {
		p.Run(j)
		var zero J
		j = zero // nothing of a finished job stays reachable while parked
		if !p.park(g) {
			return
		}
	}
}

// wait returns g's next job; false means g is to end.
func (g *goroutine[J]) wait(p *Pool[J], t *time.Timer) (J, bool) {
	if t == nil {
		j, ok := <-g.jobs
		return j, ok
	}
	t.Reset(p.Idle)
	select {
	case j, ok := <-g.jobs:
		return j, ok
	case <-t.C:
		if p.leave(g) {
			var zero J
			return zero, false
		}
		j, ok := <-g.jobs // taken as the timer fired: its job is on the way
		return j, ok
	}
}

// park offers g for the next job; false means it is to end.
func (p *Pool[J]) park(g *goroutine[J]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.Max {
		return false
	}
	p.idle = append(p.idle, g)
	return true
}

// leave takes a parked g out of the pool; false means a job took it first.
func (p *Pool[J]) leave(g *goroutine[J]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.idle, g); i >= 0 {
		p.idle = slices.Delete(p.idle, i, i+1)
		return true
	}
	return false
}
