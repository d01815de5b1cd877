package afxdp

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/internal/monoclock"
)

// A parked reactor sleeps in the link's Wait, which hands its descriptors
// to Go's netpoller. The scheduler polls the network only when a P runs out
// of goroutines, so while another reactor of the same process spins, each
// of its yields finding itself on the run queue, the parked one's packets
// wait until the spinner sleeps too: a request sent to a parked peer in this
// process was answered a whole Spin and a wake-up late, and two
// reactors that took turns parking kept each call that slow.
//
// So an idle reactor helps: on each full idle turn it looks at the other
// parked reactors of the process whose links can tell without a system
// call that a datagram waits (pender), and runs a step of their loop for
// them under their loop lock (as a sender does, see enqueue), receiving,
// handling and transmitting. It also wakes the reactor it helped, once
// until that one wakes, so that it polls on its own again: one left
// parked while others stepped it kept its descriptors armed in the
// netpoller, every packet to it ran epoll's callbacks and woke an idle
// thread of the runtime, and sequential calls on a quiet host were slower
// than with both reactors polling. A step it ran may leave a timer (a
// delayed acknowledgement) due before the parked reactor wakes on its
// own: the helper runs it when due while it spins, and wakes the parked
// reactor before it parks itself.

// pender is implemented by links that tell cheaply, from any goroutine,
// whether a datagram waits (link.XSKLink, link.MemLink).
type pender interface{ Pending() bool }

// reactors lists the endpoints of this process that can be helped.
var reactors struct {
	mu       sync.Mutex
	list     atomic.Pointer[[]*Endpoint] // replaced whole under mu, read without it
	sleeping atomic.Int32                // how many of them are parked now
}

// addReactor makes e one that idle reactors help while it is parked.
func addReactor(e *Endpoint) {
	reactors.mu.Lock()
	defer reactors.mu.Unlock()
	var l []*Endpoint
	if p := reactors.list.Load(); p != nil {
		l = slices.Clone(*p)
	}
	l = append(l, e)
	reactors.list.Store(&l)
}

// removeReactor undoes addReactor; a helper that read the list before
// finds e's loop lock held for good (shutdown keeps it).
func removeReactor(e *Endpoint) {
	reactors.mu.Lock()
	defer reactors.mu.Unlock()
	p := reactors.list.Load()
	if p == nil {
		return
	}
	l := slices.DeleteFunc(slices.Clone(*p), func(x *Endpoint) bool { return x == e })
	reactors.list.Store(&l)
}

// helpParked runs a step for each other parked reactor that has a datagram
// waiting or a timer of a helped step due, as of now. It reports whether
// it ran any.
func (e *Endpoint) helpParked(now int64) (helped bool) {
	if reactors.sleeping.Load() == 0 {
		return false
	}
	p := reactors.list.Load()
	if p == nil {
		return false
	}
	for _, o := range *p {
		if o != e && o.sleeping.Load() && o.help(now) {
			helped = true
		}
	}
	return helped
}

// help runs a step of e's loop for its parked reactor, if it has work as
// of now (monoclock.Nanos), and reports whether it did.
func (e *Endpoint) help(now int64) bool {
	if !e.loop.TryLock() {
		return false // awake, or being stepped by a sender or another helper
	}
	defer e.loop.Unlock()
	// Holding the loop lock with sleeping set, the reactor is parked and
	// its link open: shutdown keeps the lock until the link is closed.
	if !e.sleeping.Load() || e.stopping.Load() {
		return false
	}
	due := e.helpDue.Load()
	// Work queued by other goroutines counts too: a sender that found the
	// lock taken woke the reactor through the netpoller as well.
	if !e.pend.Pending() && !e.inbox.flag.Load() && !e.readyFlag.Load() && !e.env.Mem.Freed() && (due == 0 || now < due) {
		return false
	}
	// Senders the handlers run here (an inline answer) then only queue,
	// as they do on the awake reactor; the step takes their work.
	e.sleeping.Store(false)
	next, more, err := e.step()
	e.parking.active = true
	e.sleeping.Store(true)
	// A sender that found the reactor awake meanwhile left its work
	// flagged; one that comes after the store finds it asleep and wakes
	// it, as the loop lock is held.
	if e.readyFlag.Load() {
		e.takeReady()
		var m bool
		next, m = e.transmit()
		more = more || m
	}
	e.ctr.helped.Add(1)
	if !e.helpWoke.Swap(true) {
		e.link.Wake()
	}
	if more || err != nil {
		// More to send than a step's budget, or a link that failed: the
		// reactor's own loop deals with it.
		e.link.Wake()
	}
	e.helpDue.Store(next)
	return true
}

// step runs one turn of the reactor's work, without waiting: it receives
// and handles a batch, takes what other goroutines queued, runs the
// timers, transmits and flushes. It returns the earliest timer, whether a
// session had more to send than its budget, and the link's error from
// Receive, which it leaves to the reactor.
func (e *Endpoint) step() (next int64, more bool, err error) {
	// The clock is read after the receive: what the step delivers is
	// stamped with it (see turn.received).
	n, err := e.link.Receive(e.rx)
	e.env.Now = monoclock.Nanos()
	for i := range n {
		e.handle(&e.rx[i])
	}
	if n > 0 {
		e.ctr.received.Add(uint64(n))
	}
	if e.inbox.flag.Load() {
		e.handleInbox()
	}
	if e.readyFlag.Load() {
		e.takeReady()
	}
	if e.env.Mem.Freed() {
		e.env.RetryMemory(e.endProtocolSession)
	}
	next, more = e.transmit()
	return next, more, err
}

// wakeHelped wakes the parked reactors whose helped steps left a timer due
// before they wake on their own; called by a reactor about to park, which
// stops running those timers for them.
func (e *Endpoint) wakeHelped() {
	if reactors.sleeping.Load() == 0 {
		return
	}
	p := reactors.list.Load()
	if p == nil {
		return
	}
	for _, o := range *p {
		if o == e || !o.sleeping.Load() {
			continue
		}
		if due := o.helpDue.Load(); due != 0 && due < o.parkUntil.Load() {
			o.link.Wake()
		}
	}
}
