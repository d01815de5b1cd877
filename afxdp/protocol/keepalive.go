package protocol

import (
	"fmt"
	"time"
)

// keepalive probes a session whose peer has been silent for a quarter of
// Config.IdleTimeout, and again each quarter, with an ACK its peer answers
// at once (FlagProbe); it returns an error ending the session when the
// peer has been silent for all of it. It returns when it next needs a
// look.
func (s *Session) keepalive() (int64, error) {
	idle := int64(s.env.cfg.IdleTimeout)
	if idle <= 0 {
		return 0, nil
	}
	now := s.env.Now
	every := idle / 4
	quiet := now - s.heardAt
	if quiet < every {
		return s.heardAt + every, nil // the common case: heard lately
	}
	if quiet >= idle {
		s.env.Ctr.Idle.Add(1)
		s.control(TypeClose)
		return 0, fmt.Errorf("afxdp: session %#x with %v: nothing heard for %v: %w",
			s.key.ID, s.key.Peer, time.Duration(idle), ErrPeerUnreachable)
	}
	if s.probedAt < s.heardAt || now-s.probedAt >= every {
		s.probe()
		s.probedAt = now
	}
	return min(s.probedAt+every, s.heardAt+idle), nil
}

// probe sends an ACK its peer answers at once (FlagProbe).
func (s *Session) probe() {
	buf := s.env.tx.TxBuffer()
	if buf == nil {
		return // the next look tries again
	}
	h := PacketHeader{Type: TypeAck, Flags: FlagProbe, Session: s.key.ID}
	s.fillAck(&h)
	PutHeader(buf, &h)
	s.env.queue(HeaderLen, s.key.Peer)
}
