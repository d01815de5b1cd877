package protocol

import (
	"fmt"
	"time"
)

// Handle takes a packet of this session, decoded by DecodeHeader: its
// acknowledgement and credit, its data, and what it asks for (OPEN's
// answer, a probe's ACK). A non-nil error ends the session: the owner
// calls End with it (the session already told the peer, where it owes it
// a RESET).
func (s *Session) Handle(h *PacketHeader, data []byte) error {
	switch h.Type {
	case TypeOpen:
		// The dialer's OPEN again: the answer was lost.
		s.heardAt = s.env.Now
		s.Agree(h.Offset)
		s.onAck(h)
		s.openAck()
		return nil
	case TypeReset:
		return fmt.Errorf("afxdp: session %#x with %v: %w", h.Session, s.key.Peer, ErrReset)
	}
	s.heardAt = s.env.Now
	if h.Flags&FlagSize != 0 {
		// The answer to this end's OPEN, or a repeat of it: acknowledge
		// it, which completes the peer's handshake.
		s.Agree(h.Offset)
		s.ackNow()
	}
	if h.Flags&FlagProbe != 0 {
		// Also a window probe (rack.go's ask): there may be room now,
		// as for a packet kept that comes again (onData).
		if err := s.Reopen(); err != nil {
			s.control(TypeReset)
			return err
		}
		s.ackNow()
	}
	if s.opening {
		s.opening = false // any answer opens the session
		s.due = 0         // its clocks are others now
	}
	switch h.Type {
	case TypeData:
		return s.handleData(h, data)
	case TypeAck:
		s.onAck(h)
		if h.Flags&FlagSack != 0 {
			s.onSack(h.Ack, data)
		}
		if h.Flags&FlagDsack != 0 {
			s.onDsack(h.Msg)
		}
	case TypeClose:
		return fmt.Errorf("afxdp: session %#x with %v: %w", h.Session, s.key.Peer, ErrPeerClosed)
	}
	return nil
}

// handleData takes a DATA packet and schedules its acknowledgement.
// Packets of a frame still arriving in order are acknowledged every
// Config.AckEvery packets, or AckEvery packet times after the first one
// unacknowledged: an ACK costs the receiver a transmit kick and the sender
// a wake-up, and one per received batch (a few packets) halved the rate
// of a large tensor. A completed frame's acknowledgement waits up to
// Config.AckDelay for an answer or the next request to carry it. A gap
// is reported at the end of the step (Env.FlushAcks).
func (s *Session) handleData(h *PacketHeader, data []byte) error {
	now := s.env.Now
	s.dataAt = now
	s.onAck(h)
	urgent, err := s.onData(h, data)
	if err != nil {
		s.control(TypeReset)
		return err
	}
	cfg := &s.env.cfg
	inOrder := !urgent && (s.ooo == nil || s.ooo.held == 0)
	switch {
	case s.inAcks:
	case !s.ackOwed && !urgent:
	case s.framed && inOrder && cfg.AckDelay > 0:
		if s.ackAt == 0 {
			s.ackAt = now + int64(cfg.AckDelay)
			s.dueBy(s.ackAt)
		}
	case !s.framed && inOrder && s.unacked < cfg.AckEvery:
		if s.ackAt == 0 {
			s.ackAt = now + int64(time.Duration(cfg.AckEvery)*ackPacketTime)
			s.dueBy(s.ackAt)
		}
	default:
		s.inAcks = true
		s.env.acks = append(s.env.acks, s)
	}
	return nil
}

// ackNow has the session acknowledge at the end of this step, whatever
// the acknowledgement policy says: a peer asked (FlagProbe), or its
// handshake waits for it.
func (s *Session) ackNow() {
	s.ackOwed = true
	if !s.inAcks {
		s.inAcks = true
		s.env.acks = append(s.env.acks, s)
	}
}
