package afxdp

import (
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/monoclock"
)

// idleFullEvery is how many idle turns of the reactor's loop make one
// full turn. A full turn reads the clock and runs every session's timers
// and transmit queue, as every turn once did. The turns between only poll
// the link and the flags other goroutines raise, since nothing a timer or
// a transmission depends on has changed, and yield: a poll then costs
// little more than the trip through the scheduler, so the spinning
// reactor sees a packet sooner and takes less CPU from the goroutines it
// yields to. (Yielding less often as well made the goroutines a reactor
// shares its P with wait behind its polls.) A turn that receives, or finds
// work flagged, reads the clock and runs them at once. Options.Spin is
// judged by the clock of the last full turn, so an idle spell ends at the
// first full turn after Spin has passed, up to idleFullEvery-1 polls (and
// yields) later.
const idleFullEvery = 8

// turn is what the reactor's loop keeps from one turn to the next to make
// idle turns cheap.
type turn struct {
	idles   int   // idle turns since the last one that worked
	clocked bool  // this turn read the clock
	next    int64 // the earliest timer, as of the last pumpAll, for park (monoclock.Nanos; 0: none)
}

// start begins a turn: a full one reads the clock into env.Now.
func (t *turn) start(env *protocol.Env) {
	t.clocked = false
	if t.idles%idleFullEvery == 0 {
		t.clock(env)
	}
}

// clock makes env.Now this turn's time, reading the clock once a turn.
func (t *turn) clock(env *protocol.Env) {
	if !t.clocked {
		env.Now = monoclock.Nanos()
		t.clocked = true
	}
}

// received makes env.Now the time after a receive that found datagrams,
// even on a turn that read the clock before it: what the turn delivers is
// stamped with env.Now (Conn.DeliveredAt, from which a server counts a
// call's deadline), and a stamp read before the receive can predate the
// request's send by as long as the poll waited.
func (t *turn) received(env *protocol.Env) {
	env.Now = monoclock.Nanos()
	t.clocked = true
}

// pumps reports whether the turn runs the timers and transmit queues:
// one that read the clock does. Between two such turns no timer comes
// due, as the clock stands still for them.
func (t *turn) pumps() bool { return t.clocked }

// worked records a turn that did work: the next is a full one.
func (t *turn) worked() { t.idles = 0 }

// idle records a turn that found nothing to do.
func (t *turn) idle() { t.idles++ }
