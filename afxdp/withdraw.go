package afxdp

import (
	"slices"

	"github.com/starwire/starwire/wire"
)

// withdrawal is a Withdraw call waiting for the reactor's answer.
type withdrawal struct {
	m   *wire.Message
	got chan wire.Withdrawal
}

// Withdraw takes m, sent on c, back, so that its caller may reuse or free
// its memory at once: the session reads it no more and never calls m.Done
// unless the answer is Completing.
//
// A message still in the Send queue just leaves it. One already numbered
// in the packet stream belongs to the reactor, which serves the request the
// next time it takes queued work (at once when it sleeps: the caller does
// it on the reactor's behalf, as in Send), while the caller waits: the
// stream is reliable and ordered, so a message whose packets may have left
// is finished whole, from a pooled copy of what is unacknowledged of it,
// made on the reactor, which therefore never races a read of the caller's
// memory. The copy is released when its last packet is acknowledged or the
// session ends. A message none of whose packets left is taken out of the
// stream and the ones behind it renumbered.
func (c *Conn) Withdraw(m *wire.Message) wire.Withdrawal {
	s := c.s
	s.mu.Lock()
	if i := slices.Index(s.inq, m); i >= 0 {
		s.inq = slices.Delete(s.inq, i, i+1)
		s.mu.Unlock()
		return wire.Unsent
	}
	if s.dead != nil {
		// end completed every message it held.
		s.mu.Unlock()
		return wire.Completing
	}
	w := &withdrawal{m: m, got: make(chan wire.Withdrawal, 1)}
	s.withdraws = append(s.withdraws, w)
	wasQueued := s.queued
	s.queued = true
	s.mu.Unlock()
	if !wasQueued {
		s.ep.enqueue(s)
	}
	select {
	case got := <-w.got:
		return got
	case <-s.ep.done:
		// The reactor stopped; it ended the session, answering, unless
		// the session reached it too late to be ended (a Dial racing
		// Close), and then nothing of it was ever sent.
		select {
		case got := <-w.got:
			return got
		default:
			return wire.Completing
		}
	}
}
