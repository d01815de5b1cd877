package protocol

import (
	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/wire"
)

// Withdraw takes m, handed to Send, back from the packet stream, so that
// its caller may reuse or free its memory at once: the stream is reliable
// and ordered, so a message some of whose packets may have left is
// finished whole from a pooled copy of what is unacknowledged of it (made
// here, on the owner, which therefore never races a read of the caller's
// memory; released when its last packet is acknowledged or the session
// ends); one none of whose packets left is taken out of the stream and the
// ones behind it renumbered.
func (s *Session) Withdraw(m *wire.Message) wire.Withdrawal {
	return s.withdraw(m)
}

// withdraw takes m back from the packet stream.
func (s *Session) withdraw(m *wire.Message) wire.Withdrawal {
	for j := 0; j < s.out.len(); j++ {
		om := s.out.at(j)
		if om.m != m {
			continue
		}
		if !seqLess(om.first, s.maxSent) {
			s.unnumber(j)
			return wire.Unsent
		}
		s.keepCopy(om)
		return wire.Withdrawn
	}
	return wire.Completing
}

// unnumber takes the message at out index j, none of whose packets has
// been transmitted, out of the stream. The messages behind it, none of
// them transmitted either, move forward: their packet and message numbers
// close the gap, as the peer expects both without holes.
func (s *Session) unnumber(j int) {
	om := s.out.at(j)
	shared := om.member || (j+1 < s.out.len() && s.out.at(j+1).member)
	freed := om.npk
	if shared {
		// Others ride in its packet, which stays; if om led it, the
		// next one does now.
		freed = 0
		if !om.member {
			s.out.at(j + 1).member = false
		}
	}
	if om.first+om.npk == s.assign {
		s.packLen = 0 // the last packet changed: nothing more joins it
	}
	for k := j + 1; k < s.out.len(); k++ {
		o := s.out.at(k)
		o.first -= freed
		o.no--
	}
	s.assign -= freed
	s.msgNo--
	om.m = nil
	s.out.remove(j)
	if j < s.nextIdx {
		s.nextIdx--
	}
}

// keepCopy makes the session the owner of what is left to send of om,
// part of which has been transmitted: the bytes of its tensors from the
// first unacknowledged packet on are copied into a pooled buffer, and the
// caller's message is forgotten.
func (s *Session) keepCopy(om *outMsg) {
	from := uint64(len(om.head))
	if seqLess(om.first, s.base) {
		from = max(from, uint64(s.base-om.first)*uint64(s.dataLen))
	}
	if from < om.total {
		om.own = bufpool.Get(int(om.total - from))
		copyFrame(om.own.Bytes(), om, from)
	}
	om.ownAt, om.m = from, nil
}

// finished completes the message leaving the front of the stream, or
// releases the copy that stood in for it.
func (om *outMsg) finished(err error) {
	m := om.m
	om.m = nil
	if om.own != nil {
		om.own.Release()
		om.own = nil
	}
	if m != nil {
		m.Complete(err)
	}
}
