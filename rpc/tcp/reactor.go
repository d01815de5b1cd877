package tcp

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// DefaultReactors is the number of reactors when SEASTAR_CORE_NUMBER is not
// set, as in TensorFlow's seastar protocol.
const DefaultReactors = 4

// Reactors is a group of reactors, each a goroutine that flushes the queued
// frames of the connections assigned to it, round-robin. A connection whose
// socket is idle is written directly by its caller, which gives the lowest
// latency; a reactor takes over once callers contend, and it yields once
// before taking its batch, so that the callers it competes with for the two
// cores can queue their frames first. That yield is what lets many small
// frames leave in one writev: without it a reactor flushes one or two frames
// per system call.
//
// A reactor never waits on a socket: it writes what the socket takes and
// hands a full one to that connection's drainer goroutine (see conn), so
// one peer that stops reading cannot hold up the others of its group.
type Reactors struct {
	rs   []*reactor
	next atomic.Uint32
}

// NewReactors starts n reactors (at least one). Stop ends them.
func NewReactors(n int) *Reactors {
	g := &Reactors{rs: make([]*reactor, max(n, 1))}
	for i := range g.rs {
		g.rs[i] = &reactor{wake: make(chan struct{}, 1), quit: make(chan struct{})}
		go g.rs[i].run()
	}
	return g
}

// Len returns the number of reactors.
func (g *Reactors) Len() int { return len(g.rs) }

// Stop ends the reactors' goroutines. Connections still assigned to them
// keep working: their callers then write for themselves.
func (g *Reactors) Stop() {
	for _, r := range g.rs {
		if r.stopped.CompareAndSwap(false, true) {
			close(r.quit)
		}
	}
}

func (g *Reactors) assign() *reactor {
	return g.rs[int(g.next.Add(1)-1)%len(g.rs)]
}

// sharedSize is the size SetSharedReactors asked for, 0 for
// DefaultReactors.
var sharedSize atomic.Int32

// SetSharedReactors sets the size of the shared reactor group, which every
// Transport without Reactors of its own runs on, to n when n > 0,
// DefaultReactors otherwise. It takes effect only
// before the group's first use, so a command calls it as it starts, with
// SEASTAR_CORE_NUMBER's count as rpc/cluster reads it (cluster.CoreNumber).
// Neither rpc nor this package reads the environment.
func SetSharedReactors(n int) { sharedSize.Store(int32(max(n, 0))) }

// coreNumber is the size of the shared reactor group.
func coreNumber() int {
	if n := sharedSize.Load(); n > 0 {
		return int(n)
	}
	return DefaultReactors
}

var (
	sharedOnce sync.Once
	shared     *Reactors
)

// sharedReactors is the process-wide group used by transports that were not
// given one, sized by SEASTAR_CORE_NUMBER.
func sharedReactors() *Reactors {
	sharedOnce.Do(func() { shared = NewReactors(coreNumber()) })
	return shared
}

type reactor struct {
	stopped atomic.Bool

	mu    sync.Mutex
	ready []*conn
	spare []*conn
	wake  chan struct{}
	quit  chan struct{}
}

func (r *reactor) schedule(c *conn) {
	if r.stopped.Load() {
		c.flush()
		return
	}
	r.mu.Lock()
	r.ready = append(r.ready, c)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *reactor) run() {
	for {
		select {
		case <-r.wake:
		case <-r.quit:
			return
		}
		runtime.Gosched()
		r.mu.Lock()
		batch := r.ready
		r.ready = r.spare[:0]
		r.mu.Unlock()
		for i, c := range batch {
			c.flush()
			batch[i] = nil
		}
		r.spare = batch[:0]
	}
}
