package afxdp

import (
	"slices"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// A Withdrawal says what became of a message Conn.Withdraw was asked for
// (protocol.Withdrawal).
type Withdrawal = protocol.Withdrawal

// The answers of Conn.Withdraw.
const (
	Completing = protocol.Completing
	Withdrawn  = protocol.Withdrawn
	Unsent     = protocol.Unsent
)

// withdrawal is a Withdraw call waiting for the reactor's answer.
type withdrawal struct {
	m   *wire.Message
	got chan Withdrawal
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
func (c *Conn) Withdraw(m *wire.Message) Withdrawal {
	s := c.s
	s.mu.Lock()
	if i := slices.Index(s.inq, m); i >= 0 {
		s.inq = slices.Delete(s.inq, i, i+1)
		s.mu.Unlock()
		return Unsent
	}
	if s.dead != nil {
		// end completed every message it held.
		s.mu.Unlock()
		return Completing
	}
	w := &withdrawal{m: m, got: make(chan Withdrawal, 1)}
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
			return Completing
		}
	}
}
