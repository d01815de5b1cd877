package afxdp

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/starwire/starwire/wire"
)

// sessionKey names a session: the peer's address and the id its dialer
// chose.
type sessionKey struct {
	peer netip.AddrPort
	id   uint64
}

// outMsg is a frame being sent: its head encoded once, its tensors read in
// place. Its packets are numbered first .. first+npk-1 in the session's
// stream.
type outMsg struct {
	m     *wire.Message
	head  []byte // reused by the next message in this ring slot
	total uint64 // head and payload bytes
	first uint32
	npk   uint32
	no    uint32
	// Where the last packet's tensor bytes started: tensor ti, which
	// begins at frame byte tstart, so the next packet does not scan the
	// tensors before it (a resend that goes back scans from the start).
	ti     int
	tstart uint64
	// member: the message rides in the packet of the one before it
	// (FlagPacked); so may further ones.
	member bool
}

// session is one end of a reliable, ordered, bidirectional stream of frames
// with one peer. Everything but the fields under mu belongs to the reactor.
type session struct {
	ep   *Endpoint
	key  sessionKey
	conn *Conn
	// dataLen is the frame bytes a packet carries: the smaller of the two
	// ends' datagram sizes, less the header, agreed in OPEN and its ACK.
	dataLen int

	mu       sync.Mutex
	inq      []*wire.Message // Sent, not yet taken by the reactor
	spare    []*wire.Message // the reactor's previous inq, swapped back in
	closeReq bool
	queued   bool  // on ep.ready
	dead     error // set once the session ended

	// Send side. Packet numbers: base is the oldest unacknowledged,
	// next the next to transmit (it moves back to base on a timeout),
	// maxSent one past the highest ever transmitted, assign the number
	// the next queued message starts at, limit the peer's credit.
	out          fifo[outMsg]
	nextIdx      int // out index of the message holding next
	msgNo        uint32
	base, next   uint32
	maxSent      uint32
	assign       uint32
	packLen      int // bytes packet assign-1 would hold packed; 0: others cannot join it
	limit        uint32
	rto          time.Duration // current timeout, doubled on each expiry
	rtoBase      time.Duration // from the round-trip estimate, at least Options.RTO
	srtt, rttvar time.Duration
	slots        []sendSlot // per window slot: packet number modulo Window
	retxAt       time.Time  // zero when nothing is outstanding
	lastProgress time.Time
	dupAcks      uint64

	// Receive side: expect is the next packet number wanted; packets past
	// it wait in ooo.
	expect  uint32
	naks    uint64 // out-of-order arrivals since the last ACK
	unacked int    // data packets received since the last ACK
	ackOwed bool
	inAcks  bool      // on ep.acks
	framed  bool      // a frame completed since the last acknowledgement
	ackAt   time.Time // when a delayed acknowledgement is due, if any
	ooo     *reorder
	rx      frameParser

	// Dialing: OPEN is repeated until the peer answers.
	opening  bool
	openAt   time.Time
	openWait time.Duration
	openDone chan error

	registered bool
	ended      bool
}

// emit writes packet seq, which must be queued, into a transmit buffer.
// idx is the out index of its message. It reports false when the link has
// no free buffer.
func (s *session) emit(seq uint32, idx int) bool {
	l := s.ep.link
	buf := l.TxBuffer()
	if buf == nil {
		return false
	}
	om := s.out.at(idx)
	h := PacketHeader{Type: TypeData, Session: s.key.id, Seq: seq, Msg: om.no}
	if idx+1 < s.out.len() && s.out.at(idx+1).member && s.out.at(idx+1).first == seq {
		h.Flags = FlagFirst | FlagLast | FlagPacked
		h.Length = uint16(s.writePacked(buf[HeaderLen:], idx))
	} else {
		i := seq - om.first
		d := uint64(s.dataLen)
		h.Offset = uint64(i) * d
		h.Length = uint16(min(d, om.total-h.Offset))
		if i == 0 {
			h.Flags |= FlagFirst
		}
		if i == om.npk-1 {
			h.Flags |= FlagLast
		}
		copyFrame(buf[HeaderLen:HeaderLen+int(h.Length)], om, h.Offset)
	}
	s.fillAck(&h)
	PutHeader(buf, &h)
	s.ep.queue(HeaderLen+int(h.Length), s.key.peer)
	if s.maxSent == s.base {
		s.lastProgress = s.ep.now // the clock of the dead-peer check starts now
	}
	slot := s.slot(seq)
	if now := s.ep.now.Sub(s.ep.epoch); seqLess(seq, s.maxSent) {
		slot.sentAt = 0 // resent: its acknowledgement is no round-trip sample (Karn)
		slot.resentAt = now
		s.ep.ctr.resent.Add(1)
	} else {
		*slot = sendSlot{sentAt: now}
		s.maxSent = seq + 1
	}
	if s.retxAt.IsZero() {
		s.retxAt = s.ep.now.Add(s.rto)
	}
	return true
}

// copyFrame copies the frame bytes of om from off on into dst: from the
// encoded head, then straight from the tensors' memory.
func copyFrame(dst []byte, om *outMsg, off uint64) {
	w := 0
	head := uint64(len(om.head))
	if off < head {
		w = copy(dst, om.head[off:])
		off = head
	}
	i, start := 0, head
	if om.ti > 0 && om.tstart <= off {
		i, start = om.ti, om.tstart
	}
	ts := om.m.Tensors
	found := false
	for ; i < len(ts) && w < len(dst); i++ {
		data := ts[i].Data
		end := start + uint64(len(data))
		if off < end {
			if !found {
				found, om.ti, om.tstart = true, i, start
			}
			w += copy(dst[w:], data[off-start:])
			off = end
		}
		start = end
	}
}

// fillAck sets the acknowledgement fields every packet carries.
func (s *session) fillAck(h *PacketHeader) {
	h.Ack = s.expect
	h.Window = uint32(s.ep.opts.Window)
	if s.ooo != nil && s.ooo.held > 0 {
		h.Flags |= FlagGap
	}
	s.ackOwed = false
	s.framed = false
	s.ackAt = time.Time{}
	s.naks = 0
	s.unacked = 0
}

// control sends a packet without data: ACK, OPEN, CLOSE or RESET. OPEN
// carries this end's datagram size in Offset.
func (s *session) control(t PacketType) {
	l := s.ep.link
	buf := l.TxBuffer()
	if buf == nil {
		return // the peer will ask again
	}
	h := PacketHeader{Type: t, Session: s.key.id}
	naks := s.naks
	s.fillAck(&h)
	switch t {
	case TypeAck:
		h.Offset = naks
		if h.Flags&FlagGap != 0 {
			if n := s.ooo.sack(buf[HeaderLen:], s.expect); n > 0 {
				h.Flags |= FlagSack
				h.Length = uint16(n)
			}
		}
		s.ep.ctr.acks.Add(1)
	case TypeOpen:
		h.Offset = uint64(l.MaxPayload())
	}
	PutHeader(buf, &h)
	s.ep.queue(HeaderLen+int(h.Length), s.key.peer)
}

// take moves messages from the Send queue into the packet stream, giving
// each its packet numbers. It reports whether the session is to close.
func (s *session) take() (closing bool) {
	s.mu.Lock()
	q := s.inq
	s.inq = s.spare[:0]
	closing = s.closeReq
	s.queued = false
	s.mu.Unlock()
	d := uint64(s.dataLen)
	for i, m := range q {
		q[i] = nil
		om := s.out.push()
		head, err := wire.AppendHead(om.head[:0], m)
		if err != nil {
			s.out.size-- // give the slot back
			m.Complete(fmt.Errorf("afxdp: send to %v: %w", s.key.peer, err))
			continue
		}
		total := uint64(len(head)) + m.Header.PayloadLen
		*om = outMsg{m: m, head: head, total: total, first: s.assign, npk: uint32((total + d - 1) / d), no: s.msgNo}
		s.msgNo++
		if s.join(om) {
			continue
		}
		s.assign += om.npk
		s.packLen = 0
		if om.npk == 1 {
			s.packLen = packedLen(om.total)
		}
	}
	s.spare = q[:0]
	return closing
}

// pump transmits new or repeated packets the window allows, at most budget
// of them, and reports how many it sent.
func (s *session) pump(budget int) int {
	sent := 0
	for sent < budget && seqLess(s.next, s.assign) && seqLess(s.next, s.limit) &&
		seqLess(s.next, s.base+uint32(s.ep.opts.Window)) {
		for {
			om := s.out.at(s.nextIdx)
			if s.next-om.first < om.npk {
				break
			}
			s.nextIdx++
		}
		if s.next != s.base && seqLess(s.next, s.maxSent) && s.slot(s.next).held {
			// Going back, and the peer has it. The oldest goes again
			// even so: a receiver whose delivery queue was full holds
			// it without taking it, and waits for it to come again.
			s.next++
			continue
		}
		if !s.emit(s.next, s.nextIdx) {
			break
		}
		s.next++
		sent++
	}
	return sent
}

// onAck takes the acknowledgement and credit every packet carries.
func (s *session) onAck(h *PacketHeader) {
	a := h.Ack
	if seqLess(a, s.base) || seqLess(s.maxSent, a) {
		return // stale, or acknowledging what was never sent
	}
	s.limit = a + h.Window
	if a == s.base {
		if s.base == s.maxSent || h.Type != TypeAck || h.Flags&FlagSize != 0 {
			return // nothing outstanding, or no duplicate count in Offset
		}
		// A duplicate acknowledgement: the peer got packets past a gap.
		s.dupAcks += h.Offset
		if s.dupAcks >= 3 {
			s.fastRetransmit()
		}
		return
	}
	s.base = a
	for s.out.len() > 0 {
		om := s.out.at(0)
		if seqLess(a, om.first+om.npk) {
			break
		}
		m := om.m
		om.m = nil
		s.out.pop()
		s.nextIdx = max(0, s.nextIdx-1)
		m.Complete(nil)
	}
	if seqLess(s.next, a) {
		s.next, s.nextIdx = a, 0
	}
	s.lastProgress = s.ep.now
	// A packet the peer held past a gap was answered late, by the gap
	// filling: its round trip was sampled when its SACK came.
	if sl := s.slot(a - 1); sl.sentAt != 0 && !sl.held {
		s.sampleRTT(s.ep.now.Sub(s.ep.epoch) - sl.sentAt)
	}
	s.rto = s.rtoBase
	s.dupAcks = 0
	if a == s.maxSent {
		s.retxAt = time.Time{}
		return
	}
	s.retxAt = s.ep.now.Add(s.rto)
	if h.Flags&FlagGap != 0 {
		// The peer holds packets past a new gap: the packet at it was
		// lost, or is late; send it again now rather than at the timeout.
		s.fastRetransmit()
	}
}

// sampleRTT updates the round-trip estimate and the timeout derived from
// it as TCP does (RFC 6298), bounded by Options.RTO and MaxRTO, so a loaded
// host whose answers come late is not flooded with spurious timeouts.
func (s *session) sampleRTT(r time.Duration) {
	if s.srtt == 0 {
		s.srtt, s.rttvar = r, r/2
	} else {
		d := s.srtt - r
		if d < 0 {
			d = -d
		}
		s.rttvar = (3*s.rttvar + d) / 4
		s.srtt = (7*s.srtt + r) / 8
	}
	o := &s.ep.opts
	s.rtoBase = min(max(s.srtt+4*s.rttvar, o.RTO), o.MaxRTO)
}

// fastRetransmit sends the oldest unacknowledged packet again, at most once
// per half RTO.
func (s *session) fastRetransmit() {
	if s.resentLately(s.base) {
		return
	}
	if s.emit(s.base, 0) {
		s.dupAcks = 0
	}
}

// timers runs the retransmission and dead-peer clocks and returns the next
// time they need a look (zero for none).
func (s *session) timers() (time.Time, error) {
	now := s.ep.now
	if s.opening {
		if now.Before(s.openAt) {
			return s.openAt, nil
		}
		s.control(TypeOpen)
		s.openWait = min(2*s.openWait, s.ep.opts.MaxRTO)
		s.openAt = now.Add(s.openWait)
		return s.openAt, nil
	}
	var ackAt time.Time
	if !s.ackAt.IsZero() {
		if s.ackOwed && !now.Before(s.ackAt) {
			s.control(TypeAck) // nothing carried it in time
		} else if s.ackOwed {
			ackAt = s.ackAt
		} else {
			s.ackAt = time.Time{}
		}
	}
	if s.retxAt.IsZero() {
		return ackAt, nil
	}
	if now.Sub(s.lastProgress) > s.ep.opts.DeadAfter {
		return time.Time{}, fmt.Errorf("afxdp: session %#x with %v: no acknowledgement for %v: %w",
			s.key.id, s.key.peer, s.ep.opts.DeadAfter, ErrPeerUnreachable)
	}
	if now.Before(s.retxAt) {
		if !ackAt.IsZero() && ackAt.Before(s.retxAt) {
			return ackAt, nil
		}
		return s.retxAt, nil
	}
	// Go back N: everything from the oldest unacknowledged packet again,
	// but for what the peer said it holds (pump skips those).
	s.next, s.nextIdx = s.base, 0
	s.rto = min(2*s.rto, s.ep.opts.MaxRTO)
	s.retxAt = now.Add(s.rto)
	return s.retxAt, nil
}

// onData takes a DATA packet: in order, it lands in its frame; ahead of
// order, it waits in the reorder buffer; behind, it is a duplicate.
func (s *session) onData(h *PacketHeader, data []byte) error {
	s.ackOwed = true
	s.unacked++
	switch {
	case h.Seq == s.expect:
		ok, err := s.accept(h, data)
		if err != nil || !ok {
			return err
		}
		if s.ooo != nil && s.ooo.held > 0 {
			s.ooo.take(h.Seq) // a copy held when there was no room for it
		}
		for s.ooo != nil && s.ooo.held > 0 {
			hh, dd, ok := s.ooo.take(s.expect)
			if !ok {
				break
			}
			if ok, err := s.accept(hh, dd); err != nil || !ok {
				s.ooo.put(hh, dd) // no room for delivery yet: keep it
				return err
			}
		}
	case seqLess(s.expect, h.Seq) && seqLess(h.Seq, s.expect+uint32(s.ep.opts.Window)):
		if s.ooo == nil {
			s.ooo = newReorder(s.ep.opts.Window, s.dataLen)
		}
		s.ooo.put(h, data)
		s.naks++
	default:
		s.ep.ctr.dups.Add(1)
	}
	return nil
}

// accept lands the next in-order packet in its frame. It reports false,
// leaving the packet unaccepted, when a frame would complete but the
// delivery queue is full.
func (s *session) accept(h *PacketHeader, data []byte) (bool, error) {
	if h.Flags&FlagPacked != 0 {
		return s.acceptPacked(h, data)
	}
	if h.Flags&FlagLast != 0 && !s.conn.room(1) {
		return false, nil
	}
	in, err := s.rx.feed(h, data, s.conn, &s.ep.opts.Limits)
	if err != nil {
		return false, fmt.Errorf("afxdp: session %#x from %v: %w", s.key.id, s.key.peer, err)
	}
	s.expect++
	if in != nil {
		s.framed = true
		s.conn.deliver(in)
	}
	return true, nil
}

// end finishes the session with err: every message it holds completes with
// err, and its Conn's Receive returns.
func (s *session) end(err error) {
	if s.ended {
		return
	}
	s.ended = true
	s.mu.Lock()
	s.dead = err
	q := s.inq
	s.inq = nil
	s.mu.Unlock()
	for s.out.len() > 0 {
		om := s.out.at(0)
		m := om.m
		om.m = nil
		s.out.pop()
		m.Complete(err)
	}
	for _, m := range q {
		m.Complete(err)
	}
	s.rx.reset()
	if r := s.conn.receiver(); r != nil && !s.ep.opts.BlockingReceiver {
		s.conn.drainBacklog(r)
	}
	if s.opening {
		s.opening = false
		s.openDone <- err
	}
	s.conn.finish(err)
}

// openAck answers an OPEN: an ACK whose Offset is this end's datagram size,
// flagged FlagSize, so the dialer learns the size both ends can carry.
func (s *session) openAck() {
	l := s.ep.link
	buf := l.TxBuffer()
	if buf == nil {
		return // the dialer repeats its OPEN
	}
	h := PacketHeader{Type: TypeAck, Session: s.key.id, Flags: FlagSize, Offset: uint64(l.MaxPayload())}
	s.fillAck(&h)
	PutHeader(buf, &h)
	s.ep.queue(HeaderLen, s.key.peer)
}

// agree takes the peer's datagram size from an OPEN or its answer.
func (s *session) agree(peerMax uint64) {
	if peerMax > HeaderLen && peerMax-HeaderLen < uint64(s.dataLen) {
		s.dataLen = int(peerMax - HeaderLen)
	}
}
