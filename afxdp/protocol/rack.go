package protocol

import "time"

// Loss detection, after RACK-TLP (RFC 8985). A packet is lost when a packet
// sent after it has been delivered (acknowledged cumulatively or
// selectively) and a reordering window has passed since it was sent and
// since that delivery's round trip: time, not a count of packets overtaking
// it, tells reordering from loss. So a packet that is merely late is not
// resent, however many overtook it, and a lost retransmission is found as
// a lost original is.
//
// Two timers back it up, for losses no later delivery reveals: the tail
// loss probe resends the last packet in flight after about two round trips
// without an acknowledgement (its answer, a selective acknowledgement,
// lets RACK find the rest), and the retransmission timeout, doubling on
// each expiry, resends the oldest. Neither resends a window: a timer that
// fired only because the peer answered late (a loaded host, a descheduled
// reactor) costs one packet.
//
// How late a packet may be is the reordering window: nothing until some
// reordering was seen, once three packets past a gap are held or while
// recovering (RACK's fallback to TCP's three duplicate acknowledgements);
// otherwise how late overtaken packets were seen to come (past the time a
// window of nothing would have found them lost; a late original of a
// packet resent counts too), at least a quarter of the minimum round trip,
// plus a quarter of that for each report from the peer that it received a
// retransmission twice (FlagDsack), and never more than the retransmission
// timeout. RFC 8985 bounds it by the smoothed round trip, but here packets
// are reordered by reactors and schedulers (a Group's forwarding, a link
// that holds a datagram to its next flush), not by paths, and often come
// later than that. What was learnt decays: after loss detection found
// packets lost reoPersist times with no report of a spurious resend, the
// window returns halfway.
//
// Whether a delivered packet that was sent twice got there as the
// retransmission or as the original, late, the acknowledgement's echo
// tells (the role TCP's timestamps play); without it a late original would
// make RACK take every packet sent between the two copies for lost.

// sendSlot is what the sender keeps about one packet in flight.
type sendSlot struct {
	sentAt time.Duration // when first sent, since env.epoch; 0 once resent (Karn)
	// zeroAt is when its first copy would have been found lost with no
	// reordering window, once a packet sent after it was delivered; 0
	// before.
	zeroAt time.Duration
	xmitAt time.Duration // when last sent, since env.epoch
	// xmitN orders its last copy among the session's transmissions
	// (rackState.sends when it went): what RACK means by "sent after".
	// Not xmitAt: the clock is read once a reactor turn, and a turn
	// that resends a packet may send later-numbered ones in the same
	// clock tick, before or after it; taking the number as the
	// tie-break found a resent packet lost as soon as a packet sent
	// before it, in the same tick, was delivered, and resent it again.
	xmitN  uint64
	resent bool  // sent more than once
	tx     uint8 // the transmission byte of its last copy
	held   bool  // the peer holds it past a gap (FlagSack)
	lost   bool  // RACK or a timer found it lost; pump resends it
}

// slot returns the state of packet seq, which must be in the window.
func (s *Session) slot(seq uint32) *sendSlot { return &s.slots[seq%uint32(len(s.slots))] }

// Timer kinds of rackState.timer.
const (
	timerNone  = iota
	timerProbe // tail loss probe
	timerRTO   // retransmission timeout
)

// maxReoMult bounds the reordering window's growth on reports of spurious
// retransmissions, in quarters of its base.
const maxReoMult = 16

// reoPersist is how many times loss detection finds packets lost, with no
// report of a spurious retransmission, before the reordering window shrinks
// back halfway, as RFC 8985 suggests.
const reoPersist = 16

// rackState is a session's round-trip estimate and loss detection state.
// Times are since env.epoch, as in sendSlot.
type rackState struct {
	srtt, rttvar, minRTT time.Duration
	rtoBase              time.Duration // srtt+4·rttvar, within Config.RTO and MaxRTO
	rto                  time.Duration // the current timeout, doubled on each expiry

	// The most recently sent packet delivered: its last transmission
	// (RACK.xmit_ts, as a place in the order of transmissions: xmitN),
	// number and round trip (end_seq, rtt), and whether that
	// transmission was a retransmission. xmitN 0: none delivered yet.
	xmitN     uint64
	seq       uint32
	rtt       time.Duration
	xmitResnt bool
	fack      uint32        // one past the highest packet delivered
	echo      uint64        // the echo of the acknowledgement being taken (see echoOf)
	reord     bool          // a packet was delivered after one sent later
	reoMult   int           // quarters added to the window's base, plus 1
	reoSeen   time.Duration // the latest an overtaken packet came (see late)
	now       time.Duration // the clock while an acknowledgement is taken
	persist   int           // recoveries left before reoMult returns to 1
	afterRTO  bool          // a timeout fired since the last delivery

	sends uint64 // transmissions so far, the last one's sendSlot.xmitN

	held int // packets past base the peer holds (held slots)
	lost int // packets marked lost, not yet resent

	resentSeqs [resentLog]uint32 // the last packets resent, for onDsack
	resentNext uint32

	timer   int   // timerNone, timerProbe or timerRTO
	timerAt int64 // when timer fires (on env.Now's scale)
	reoAt   int64 // when a packet RACK is not yet sure of becomes lost; 0: none
}

func (r *rackState) init(o *Config) {
	r.rtoBase, r.rto, r.reoMult = o.RTO, o.RTO, 1
}

// sampleRTT updates the round-trip estimate and the timeout derived from
// it as TCP does (RFC 6298), bounded by Config.RTO and MaxRTO, so a loaded
// host whose answers come late is not flooded with spurious timeouts.
func (s *Session) sampleRTT(rtt time.Duration) {
	r := &s.rack
	if rtt <= 0 {
		rtt = 1
	}
	if r.srtt == 0 {
		r.srtt, r.rttvar, r.minRTT = rtt, rtt/2, rtt
	} else {
		d := r.srtt - rtt
		if d < 0 {
			d = -d
		}
		r.rttvar = (3*r.rttvar + d) / 4
		r.srtt = (7*r.srtt + rtt) / 8
		r.minRTT = min(r.minRTT, rtt)
	}
	o := &s.env.cfg
	r.rtoBase = min(max(r.srtt+4*r.rttvar, o.RTO), o.MaxRTO)
}

// clock is the sessions' time base: now, since env.epoch.
func (s *Session) clock() time.Duration { return time.Duration(s.env.Now - s.env.epoch) }

// delivered records that packet seq, sent and not delivered before, reached
// the peer (RFC 8985, "Update RACK stats" and "Detect reordering"). fack is
// rack.fack before the acknowledgement that delivered it.
func (s *Session) delivered(seq uint32, sl *sendSlot, fack uint32) {
	r := &s.rack
	if sl.resent {
		// Which copy got there? Only the acknowledgement's echo says.
		// Taking the last copy when an earlier one, merely late, got
		// there would find every packet sent in between lost.
		e, tx, ok := echoed(r.echo)
		if !ok || e != seq {
			return
		}
		if tx == 0 && sl.tx != 0 {
			// The original, overtaken: it was resent for nothing.
			r.reord = true
			r.late(sl)
		}
		if tx != sl.tx {
			return // (a later copy that was not needed: the timers')
		}
	}
	if sl.xmitN > r.xmitN {
		r.xmitN, r.seq, r.rtt, r.xmitResnt = sl.xmitN, seq, s.clock()-sl.xmitAt, sl.resent
	}
	if seqLess(seq, fack) && !sl.resent {
		r.reord = true
		r.late(sl)
	}
}

// late records how late an overtaken packet came: after the time it
// would have been found lost with no reordering window at all.
func (r *rackState) late(sl *sendSlot) {
	if sl.zeroAt == 0 {
		return // never waited for
	}
	if d := r.now - sl.zeroAt; d > r.reoSeen {
		r.reoSeen = d
	}
}

// newFack moves rack.fack past seq.
func (r *rackState) newFack(seq uint32) {
	if !seqLess(seq, r.fack) {
		r.fack = seq + 1
	}
}

// reoWnd is how long past a round trip a packet may be late before it is
// lost (RFC 8985, "Update RACK reordering window").
func (s *Session) reoWnd() time.Duration {
	r := &s.rack
	if !r.reord && (r.lost > 0 || r.afterRTO || r.held >= dupThresh) {
		return 0
	}
	base := max(r.reoSeen, r.minRTT/4)
	return min(base+time.Duration(r.reoMult)*base/4, r.rtoBase)
}

// detectLoss marks lost every outstanding packet sent before the most
// recently sent delivered one, once the reordering window has passed for
// it, and sets the reorder timer for those still within it.
func (s *Session) detectLoss() {
	r := &s.rack
	r.reoAt = 0
	if r.xmitN == 0 || s.base == s.maxSent {
		return
	}
	now, wnd := s.clock(), s.reoWnd()
	// Only retransmissions can have been sent before a delivered original
	// with a higher number; the originals go out in order.
	end := s.maxSent
	if !r.xmitResnt && seqLess(r.seq, end) {
		end = r.seq
	}
	marked := 0
	for seq := s.base; seqLess(seq, end); seq++ {
		sl := s.slot(seq)
		if sl.held || sl.lost || (seq == s.base && s.peerWnd == 0) {
			continue // the peer has it, or holds base for lack of room
		}
		if sl.xmitN >= r.xmitN {
			continue // sent after the packet delivered last (or is it)
		}
		if sl.zeroAt == 0 && !sl.resent {
			sl.zeroAt = sl.xmitAt + r.rtt
		}
		if wait := sl.xmitAt + r.rtt + wnd - now; wait > 0 {
			r.reoAt = earliest(r.reoAt, s.env.Now+int64(wait))
			s.dueBy(r.reoAt)
			continue
		}
		sl.lost = true
		r.lost++
		marked++
	}
	if marked > 0 && r.persist > 0 {
		if r.persist--; r.persist == 0 {
			r.reoMult, r.reoSeen = 1, r.reoSeen/2
		}
	}
}

// onDsack takes the peer's report that it received packet seq twice: if
// this end had resent it, the retransmission was spurious and the
// reordering window grows.
func (s *Session) onDsack(seq uint32) {
	r := &s.rack
	if !r.wasResent(seq) {
		return // the network duplicated it, or it is too old to tell
	}
	s.env.Ctr.Spurious.Add(1)
	r.reord = true
	r.reoMult = min(r.reoMult+1, maxReoMult)
	r.persist = reoPersist
}

// resentLog is how many recent retransmissions a session remembers, to
// recognise the peer's reports of duplicates (FlagDsack): they arrive a
// round trip later, when a full window may have been sent since.
const resentLog = 64

// logResent records that packet seq was sent again.
func (r *rackState) logResent(seq uint32) {
	r.resentSeqs[r.resentNext%resentLog] = seq
	r.resentNext++
}

// wasResent reports whether packet seq is among the recent retransmissions.
func (r *rackState) wasResent(seq uint32) bool {
	for i := range min(r.resentNext, resentLog) {
		if r.resentSeqs[i] == seq {
			return true
		}
	}
	return false
}

// pto is the tail loss probe's timeout: two round trips, plus the time the
// peer may hold an acknowledgement back when one packet is in flight, at
// least Config.RTO.
func (s *Session) pto() time.Duration {
	r := &s.rack
	if r.srtt == 0 {
		return r.rto
	}
	p := 2 * r.srtt
	if s.maxSent-s.base == 1 {
		p += s.env.maxAckDelay()
	}
	return max(p, s.env.cfg.RTO)
}

// armProbe starts the tail loss probe's clock, after new data was sent or
// something was delivered, unless a timeout is backing off.
func (s *Session) armProbe() {
	r := &s.rack
	if s.base == s.maxSent {
		r.timer, r.timerAt = timerNone, 0
		return
	}
	if r.timer == timerRTO {
		return
	}
	r.timer, r.timerAt = timerProbe, s.env.Now+int64(s.pto())
	s.dueBy(r.timerAt)
}

// fireTimer runs the probe or the timeout when due.
func (s *Session) fireTimer() {
	r := &s.rack
	if s.base == s.maxSent {
		r.timer, r.timerAt = timerNone, 0
		return
	}
	switch r.timer {
	case timerProbe:
		// The last packet the peer does not hold goes again; its
		// answer, selective, shows what else is missing.
		seq := s.maxSent - 1
		for seq != s.base && s.slot(seq).held {
			seq--
		}
		s.ask(seq)
		r.timer, r.timerAt = timerRTO, s.env.Now+int64(max(r.rto, s.pto()))
	case timerRTO:
		// The oldest goes again, and RACK, with no reordering window,
		// finds the rest lost once it is delivered: a timeout that
		// fired because the answers were slow resends one packet.
		s.ask(s.base)
		r.afterRTO = true
		r.rto = min(2*r.rto, s.env.cfg.MaxRTO)
		r.timerAt = s.env.Now + int64(r.rto)
	}
	s.env.Ctr.Probes.Add(1)
}

// ask has a timer's packet, seq, sent again for the answer it brings,
// unless the peer holds it: then seq is base, which the peer keeps without
// taking it, its window shut for lack of room (window.go), and it holds
// every packet a resend could give it. Only the ACK reopening its window
// would then move this end, and that may be lost: an ACK flagged
// FlagProbe asks for its state instead, and its answer says whether the
// window reopened.
func (s *Session) ask(seq uint32) {
	if sl := s.slot(seq); !sl.held {
		s.markLost(seq, sl)
		return
	}
	s.probe()
}

// markLost marks packet seq for pump to resend.
func (s *Session) markLost(seq uint32, sl *sendSlot) {
	if !sl.lost && !sl.held {
		sl.lost = true
		s.rack.lost++
	}
}

// resendLost resends packets marked lost, in order, at most budget of them,
// and returns how many it sent.
func (s *Session) resendLost(budget int) int {
	sent, idx := 0, 0
	for seq := s.base; s.rack.lost > 0 && sent < budget && seqLess(seq, s.maxSent); seq++ {
		if !s.slot(seq).lost {
			continue
		}
		for om := s.out.at(idx); seq-om.first >= om.npk; om = s.out.at(idx) {
			idx++
		}
		if !s.emit(seq, idx) {
			break // no transmit buffer: the next loop tries again
		}
		sent++
	}
	return sent
}
