package afxdp

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/internal/bufpool"
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
	// A withdrawn message (m nil) is sent from own, which holds its frame
	// bytes from ownAt on (withdraw.go).
	own   *bufpool.Buffer
	ownAt uint64
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

	mu        sync.Mutex
	inq       []*wire.Message // Sent, not yet taken by the reactor
	spare     []*wire.Message // the reactor's previous inq, swapped back in
	withdraws []*withdrawal   // Withdraw calls for the reactor to answer
	closeReq  bool
	queued    bool  // on ep.ready
	dead      error // set once the session ended

	// Send side. Packet numbers: base is the oldest unacknowledged,
	// next the next to transmit for the first time, maxSent one past the
	// highest ever transmitted (next, as nothing goes back), assign the
	// number the next queued message starts at, limit the peer's credit.
	out          fifo[outMsg]
	nextIdx      int // out index of the message holding next
	msgNo        uint32
	base, next   uint32
	maxSent      uint32
	assign       uint32
	packLen      int // bytes packet assign-1 would hold packed; 0: others cannot join it
	limit        uint32
	peerWnd      uint32     // the window the peer last advertised
	slots        []sendSlot // per window slot: packet number modulo Window
	rack         rackState
	lastProgress time.Time

	// Receive side: expect is the next packet number wanted; packets past
	// it wait in ooo.
	expect    uint32
	echo      uint64 // the last resent or gap-filling packet to arrive, as an ACK echoes it
	unacked   int    // data packets received since the last ACK
	ackOwed   bool
	sackOwed  bool         // packets arrived past a gap since the last ACK
	dsackOwed bool         // packet dsack arrived twice since the last ACK
	dsack     uint32       // the packet that arrived twice, for FlagDsack
	rxShut    bool         // packet expect is kept for lack of room: the window is 0
	mem       atomic.Int64 // bytes held for the receiver (budget.go)
	memWait   bool         // on ep.memWaiters
	shut      atomic.Bool  // rxShut, for the Receive goroutine
	inAcks    bool         // on ep.acks
	framed    bool         // a frame completed since the last acknowledgement
	ackAt     time.Time    // when a delayed acknowledgement is due, if any
	ooo       *reorder
	rx        frameParser

	// Dialing: OPEN is repeated until the peer answers.
	opening  bool
	openAt   time.Time
	openWait time.Duration
	openDone chan error

	// The session table (sessions.go): whether a peer opened it (and it
	// counts against the bounds), when a packet last came from the peer,
	// and when this end last probed it.
	accepted          bool
	heardAt, probedAt time.Time
	dataAt            time.Time // when a DATA packet last came

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
	slot := s.slot(seq)
	h := PacketHeader{Type: TypeData, Session: s.key.id, Seq: seq, Msg: om.no}
	if seqLess(seq, s.maxSent) {
		h.Tx = slot.tx + 1
		if h.Tx == 0 {
			h.Tx = slot.tx // saturated
		}
	}
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
	if now := s.clock(); seqLess(seq, s.maxSent) {
		slot.sentAt = 0 // resent: its acknowledgement is no round-trip sample (Karn)
		slot.xmitAt, slot.resent, slot.tx = now, true, h.Tx
		s.rack.logResent(seq)
		if slot.lost {
			slot.lost = false
			s.rack.lost--
		}
		s.ep.ctr.resent.Add(1)
	} else {
		*slot = sendSlot{sentAt: now, xmitAt: now}
		s.maxSent = seq + 1
		s.armProbe()
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
	if om.m == nil { // withdrawn
		if off < om.total {
			copy(dst[w:], om.own.Bytes()[off-om.ownAt:])
		}
		return
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
	if s.rxShut {
		h.Window = 0
	}
	if s.ooo != nil && s.ooo.held > 0 {
		h.Flags |= FlagGap
	}
	s.ackOwed = false
	s.framed = false
	s.ackAt = time.Time{}
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
	s.fillAck(&h)
	switch t {
	case TypeAck:
		h.Offset = s.echo
		if s.dsackOwed {
			h.Flags |= FlagDsack
			h.Msg = s.dsack
		}
		s.sackOwed, s.dsackOwed = false, false
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
	ws := s.withdraws
	s.withdraws = nil
	closing = s.closeReq
	s.queued = false
	s.mu.Unlock()
	defer s.serveWithdraws(ws)
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

// pump transmits the packets found lost, then new ones as the window
// allows, at most budget in all, and reports how many it sent.
func (s *session) pump(budget int) int {
	sent := 0
	if s.rack.lost > 0 {
		sent = s.resendLost(budget)
	}
	for sent < budget && seqLess(s.next, s.assign) && seqLess(s.next, s.limit) &&
		seqLess(s.next, s.base+uint32(s.ep.opts.Window)) {
		for {
			om := s.out.at(s.nextIdx)
			if s.next-om.first < om.npk {
				break
			}
			s.nextIdx++
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
	s.rack.echo, s.rack.now = 0, s.clock()
	if h.Type == TypeAck && h.Flags&FlagSize == 0 {
		s.rack.echo = h.Offset
	}
	if seqLess(a, s.base) || seqLess(s.maxSent, a) {
		return // stale, or acknowledging what was never sent
	}
	s.limit = a + h.Window
	reopened := s.peerWnd == 0 && h.Window > 0
	s.peerWnd = h.Window
	if a == s.base {
		switch {
		case s.base == s.maxSent:
		case h.Window == 0:
			// The peer is there, its window shut: it held the
			// packet at a without taking it. Probes go on.
			s.lastProgress = s.ep.now
		case reopened:
			// It has room again: the packet it would not take goes now.
			s.markLost(a, s.slot(a))
		}
		return
	}
	// Everything from base to a is delivered; those held past a gap
	// were counted when their SACK came.
	last := s.slot(a - 1)
	sample := !last.held && last.sentAt != 0
	fack := s.rack.fack
	s.rack.newFack(a - 1)
	for seq := s.base; seq != a; seq++ {
		sl := s.slot(seq)
		if sl.held {
			s.rack.held--
		} else {
			s.delivered(seq, sl, fack)
		}
		if sl.lost {
			s.rack.lost--
		}
		sl.held, sl.lost = false, false
	}
	if sample {
		s.sampleRTT(s.clock() - last.sentAt)
	}
	s.base = a
	for s.out.len() > 0 {
		om := s.out.at(0)
		if seqLess(a, om.first+om.npk) {
			break
		}
		om.finished(nil)
		s.out.pop()
		s.nextIdx = max(0, s.nextIdx-1)
	}
	if seqLess(s.next, a) {
		s.next, s.nextIdx = a, 0
	}
	s.progressed()
}

// progressed resets the timers after the peer acknowledged something new.
func (s *session) progressed() {
	s.lastProgress = s.ep.now
	s.detectLoss()
	r := &s.rack
	r.afterRTO = false
	r.rto = r.rtoBase
	r.timer = timerNone
	s.armProbe()
}

// timers runs the acknowledgement, loss detection and dead-peer clocks and
// returns the next time they need a look (zero for none).
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
	next, err := s.keepalive()
	if err != nil {
		return time.Time{}, err
	}
	if s.rx.active && now.Sub(s.dataAt) > s.ep.opts.DeadAfter {
		// A frame begun and not continued holds the memory its head
		// announced: a peer that means to send it sends, or probes.
		return time.Time{}, fmt.Errorf("afxdp: session %#x with %v: frame %d stalled for %v: %w",
			s.key.id, s.key.peer, s.rx.msg, s.ep.opts.DeadAfter, ErrPeerUnreachable)
	}
	if !s.ackAt.IsZero() {
		if s.ackOwed && !now.Before(s.ackAt) {
			s.control(TypeAck) // nothing carried it in time
		} else if s.ackOwed {
			if next.IsZero() || s.ackAt.Before(next) {
				next = s.ackAt
			}
		} else {
			s.ackAt = time.Time{}
		}
	}
	if s.base == s.maxSent {
		return next, nil
	}
	if now.Sub(s.lastProgress) > s.ep.opts.DeadAfter {
		return time.Time{}, fmt.Errorf("afxdp: session %#x with %v: no acknowledgement for %v: %w",
			s.key.id, s.key.peer, s.ep.opts.DeadAfter, ErrPeerUnreachable)
	}
	r := &s.rack
	if !r.reoAt.IsZero() && !now.Before(r.reoAt) {
		s.detectLoss()
	}
	if r.timer != timerNone && !now.Before(r.timerAt) {
		s.fireTimer()
	}
	for _, t := range [...]time.Time{r.reoAt, r.timerAt} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next, nil
}

// onData takes a DATA packet: in order, it lands in its frame; ahead of
// order, it waits in the reorder buffer; behind, it is a duplicate. It
// reports whether the packet calls for an acknowledgement at once: one
// past a gap, a duplicate (the sender did not see an acknowledgement) or
// one left for lack of room (the window closes).
func (s *session) onData(h *PacketHeader, data []byte) (urgent bool, err error) {
	if (h.Tx > 0 || (h.Seq == s.expect && s.ooo != nil && s.ooo.held > 0)) && s.isNew(h.Seq) {
		// What the sender cannot tell apart: a resent packet's
		// arrival, or an original's that fills a gap. A copy that
		// arrives second says nothing of which delivered it.
		s.echo = echoOf(h.Seq, h.Tx)
	}
	s.ackOwed = true
	s.unacked++
	switch {
	case h.Seq == s.expect && s.rxShut:
		// Kept already: a probe. There may be room now; the answer
		// says either way.
		return true, s.reopen()
	case h.Seq == s.expect:
		ok, err := s.accept(h, data)
		if err != nil {
			return false, err
		}
		if !ok {
			s.keep(h, data)
			s.shutWindow()
			return true, nil
		}
		if s.ooo != nil && s.ooo.held > 0 {
			if _, buf, ok := s.ooo.take(h.Seq); ok {
				s.ep.ooo.put(buf) // a copy held when there was no room for it
			}
		}
		all, err := s.takeHeld()
		if err != nil {
			return false, err
		}
		if !all {
			s.shutWindow()
			return true, nil
		}
	case seqLess(s.expect, h.Seq) && seqLess(h.Seq, s.expect+uint32(s.ep.opts.Window)):
		if !s.keep(h, data) {
			s.dsack, s.dsackOwed = h.Seq, true
			s.ep.ctr.dups.Add(1)
		}
		s.sackOwed = true
		return true, nil
	case seqLess(h.Seq, s.expect):
		s.dsack, s.dsackOwed = h.Seq, true
		s.ep.ctr.dups.Add(1)
		return true, nil
	default:
		s.ep.ctr.dups.Add(1) // past the window: a confused peer
	}
	return false, nil
}

// keep holds a copy of packet h in the reorder buffer and reports whether
// it was new there.
func (s *session) keep(h *PacketHeader, data []byte) bool {
	if s.ooo == nil {
		s.ooo = newReorder(s.ep.opts.Window)
	}
	return s.ooo.put(h, data, &s.ep.ooo)
}

// takeHeld takes the held packets that now come in order, as far as there
// is room for them; it reports false when one had to stay.
func (s *session) takeHeld() (bool, error) {
	for s.ooo != nil && s.ooo.held > 0 {
		h, buf, ok := s.ooo.take(s.expect)
		if !ok {
			break
		}
		ok, err := s.accept(&h, buf)
		if !ok && err == nil {
			s.ooo.restore(h, buf)
			return false, nil
		}
		s.ep.ooo.put(buf)
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// isNew reports whether packet seq has not arrived before.
func (s *session) isNew(seq uint32) bool {
	switch {
	case seq == s.expect:
		return !s.rxShut
	case seqLess(s.expect, seq) && seqLess(seq, s.expect+uint32(s.ep.opts.Window)):
		return s.ooo == nil || !s.ooo.has(seq)
	}
	return false
}

// accept lands the next in-order packet in its frame. It reports false,
// leaving the packet unaccepted, when a frame would complete but the
// delivery queue is full, or a frame would start but the memory it
// announces is not available (budget.go).
func (s *session) accept(h *PacketHeader, data []byte) (bool, error) {
	if h.Flags&FlagPacked != 0 {
		return s.acceptPacked(h, data)
	}
	if h.Flags&FlagLast != 0 && !s.conn.room(1) {
		return false, nil
	}
	in, err := s.rx.feed(h, data, s, true)
	if err == errNoRoom {
		return false, nil
	}
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
	ws := s.withdraws
	s.withdraws = nil
	s.mu.Unlock()
	for s.out.len() > 0 {
		s.out.at(0).finished(err)
		s.out.pop()
	}
	for _, m := range q {
		m.Complete(err)
	}
	for _, w := range ws {
		w.got <- Completing // every message was completed above
	}
	if c := s.rx.reset(); c > 0 {
		s.release(c)
	}
	if s.ooo != nil {
		s.ooo.free(&s.ep.ooo)
		s.ooo = nil
	}
	if s.memWait {
		// retryMemory forgets it; the waiting count goes with it.
		s.ep.mem.freed.Store(true)
	}
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
// A frame's first packet must hold its fixed header whole (frameClaim):
// sizes below that are not believed (no link carries so little).
func (s *session) agree(peerMax uint64) {
	if peerMax >= HeaderLen+minData && peerMax-HeaderLen < uint64(s.dataLen) {
		s.dataLen = int(peerMax - HeaderLen)
	}
}

// minData is the least data a packet must be able to carry.
const minData = wire.HeaderSize + packedLenBytes
