package afxdp

import "time"

// A parked reactor sleeps in the link's Wait until its next timer, but no
// longer than its park bound. The bound is there for senders: one that
// finds the reactor parked transmits itself (enqueue), and the
// retransmission timers its packets start are unknown to the sleeping
// reactor, which runs them when it wakes. While the endpoint carries
// traffic the bound is one RTO, so that such a timer runs at most an RTO
// late without a wake-up per call. Each park that ends with nothing done
// doubles the bound, up to maxPark: an endpoint left idle (a dual
// connection whose calls all take TCP, between its probe bursts) sleeps a
// few times longer and longer, then about once per maxPark, where at a
// bound of one RTO it woke 250 times a second per reactor, each wake-up a
// turn of the scheduler and a spell of polling. A sender that transmits
// while the reactor sleeps past the timers it started by more than an
// RTO wakes it (late), so the guarantee holds at any bound. While the
// bound is one RTO, a busy endpoint's, parking is as it was before the
// bound could grow: timers a pump just armed wait for the next wake-up,
// which an answer or the bound brings, so the reactor's timing on the
// paths that carry calls is unchanged.
const maxPark = time.Second

// parking is the reactor's park bound; the loop lock's holder owns it.
type parking struct {
	bound  time.Duration // the last park's bound; 0 before the first
	active bool          // the endpoint worked since the reactor last parked
}

// wait returns how long a reactor parking at now sleeps, with its next
// timer at next (0: none) and rto its options' RTO, and adapts the bound.
func (p *parking) wait(now, next int64, rto time.Duration) time.Duration {
	if p.active || p.bound == 0 {
		p.bound = rto
	} else {
		p.bound = min(2*p.bound, max(maxPark, rto))
	}
	p.active = false
	w := p.bound
	if next != 0 {
		w = min(max(time.Duration(next-now), 0), w)
	}
	return w
}

// armed returns the earliest of next and the times the sessions' timers
// need a look, those their last pumps armed included, which the reactor's
// next timer does not hold (it is read before the pump): 0 for none. It
// walks every session, so it is asked only of a park longer than an RTO.
func (e *Endpoint) armed(next int64) int64 {
	for _, s := range e.list {
		next = earliest(next, s.p.Due())
	}
	return next
}

// late reports whether a reactor parked until parkUntil would run a timer
// due at next, started while it slept, more than rto late.
func late(next, parkUntil int64, rto time.Duration) bool {
	return next != 0 && parkUntil-next > int64(rto)
}
