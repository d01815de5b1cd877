package afxdp

import "time"

// idleFullEvery is how many idle turns of the reactor's loop make one
// full turn. A full turn runs every session's timers and transmit queue,
// as every turn once did. The turns between only read the clock, poll the
// link and the flags other goroutines raise, and yield, since nothing a
// timer due within them or a transmission depends on has changed: a poll
// then costs little more than the clock and the trip through the
// scheduler, so the spinning reactor sees a packet sooner and takes less
// CPU from the goroutines it yields to. A turn that receives, or finds
// work flagged, runs them at once. A timer thus fires up to
// idleFullEvery-1 polls late. (Yielding once in idleFullEvery turns as
// well made the goroutines a reactor shares its P with wait behind its
// polls; reading the clock once in idleFullEvery made an idle spell
// outlast Options.Spin by as many yields, which in a busy process last
// long.)
const idleFullEvery = 8

// turn is what the reactor's loop keeps from one turn to the next to make
// idle turns cheap.
type turn struct {
	idles int       // idle turns since the last one that worked
	next  time.Time // the earliest timer, as of the last pumpAll, for park
}

// pumps reports whether an idle turn runs the timers and transmit queues.
func (t *turn) pumps() bool { return t.idles%idleFullEvery == 0 }

// worked records a turn that did work: the next is a full one.
func (t *turn) worked() { t.idles = 0 }

// idle records a turn that found nothing to do.
func (t *turn) idle() { t.idles++ }
