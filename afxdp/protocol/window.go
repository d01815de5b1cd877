package protocol

// Receive flow control. A packet whose frame cannot be taken now (the
// delivery queue is full, the memory its frame announces is not
// available, or the receiver, an Admitter, has no room for its payload)
// is kept in the reorder buffer and the session's window shuts:
// every packet it sends advertises a window of 0, so its peer sends nothing
// new. The peer does not resend the packet either, since the receiver has
// it; only its probes, backing off to MaxRTO, keep asking, in case the
// reopening is lost: a resend of the packet kept, or, when the peer knows
// it kept (selectively acknowledged, having come past a gap), an ACK
// flagged FlagProbe, since neither timer resends a packet the receiver
// holds. Either makes the receiver look for room again and answer at once.
// When room appears, whoever made it has the owner call
// Reopen, which takes the kept packets and reopens the window with an ACK
// at once. A peer that does not read is thus held back by its window, and
// nothing beyond a window of packets is buffered for it.

// shutWindow records that the next packet in order, kept, could not be
// taken for lack of room.
func (s *Session) shutWindow() {
	if !s.rxShut {
		s.rxShut = true
		s.shut.Store(true)
		s.env.Ctr.Deferred.Add(1)
		// The Receive goroutine may have made room just before it
		// could see shut: look again once this step is done.
		s.up.Recheck()
	}
}

// Reopen takes the packets kept for lack of room, as far as there is room
// now, and reopens the window when all could be taken. The owner calls it
// when Upper.Recheck asked, or room was made; an error ends the session
// (the caller sends RESET and calls End).
func (s *Session) Reopen() error {
	if !s.rxShut {
		return nil
	}
	from := s.expect
	all, err := s.takeHeld()
	if err != nil {
		return err
	}
	if !all {
		if s.expect != from {
			// Some were taken: say so, window still shut. The peer
			// does not probe packets it knows held, and would take
			// its silence for a dead peer's.
			s.ackNow()
		}
		return nil
	}
	s.rxShut = false
	s.shut.Store(false)
	s.retireReorder()
	s.ackNow()
	return nil
}
