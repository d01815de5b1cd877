package protocol

import (
	"fmt"
	"math"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/wire"
)

// Key names a session: the peer's address and the id its dialer chose.
type Key struct {
	Peer netip.AddrPort
	ID   uint64
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

// A Session is one end of a reliable, ordered, bidirectional stream of
// frames with one peer: sequence numbers, windows, acknowledgements (SACK,
// delayed ACKs), packing, reassembly, loss detection and its timers. It
// touches nothing but its Env and its Upper; all its methods are the
// owner's to call (see the package doc), except Release and Shut.
type Session struct {
	env *Env
	key Key
	up  Upper
	adm Admitter // up, if it is one
	// dataLen is the frame bytes a packet carries: the smaller of the two
	// ends' datagram sizes, less the header, agreed in OPEN and its ACK.
	dataLen int

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
	lastProgress int64

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
	memWait   bool         // on env.memWaiters
	shut      atomic.Bool  // rxShut, for the Receive goroutine
	inAcks    bool         // on env.acks
	framed    bool         // a frame completed since the last acknowledgement
	ackAt     int64        // when a delayed acknowledgement is due, if any
	ooo       *reorder
	rx        frameParser

	// Dialing: OPEN is repeated until the peer answers.
	opening  bool
	openAt   int64
	openWait time.Duration

	// Keepalive (keepalive.go): when a packet last came from the peer,
	// and when this end last probed it.
	heardAt, probedAt int64
	dataAt            int64 // when a DATA packet last came

	// Authentication (auth.go): the token this end's packets carry, the
	// one the peer's must, and what a dialer's OPEN carries.
	txToken, rxToken uint64
	openAuth         []byte

	// due is when Timers next has something to do, or earlier: Timers
	// sets it, and whatever starts a clock that may come due before it
	// brings it forward (dueBy). 0: Timers looks now; never: nothing runs
	// against the clock.
	due int64

	ended bool
}

// never is Session.due when no clock runs.
const never = math.MaxInt64

// dueBy has Timers look at the session by t at the latest.
func (s *Session) dueBy(t int64) {
	if t < s.due {
		s.due = t
	}
}

// NewSession returns a session named key in env, handing received frames
// to up. It is idle until the owner calls Start (a session it accepted) or
// Dial.
func NewSession(env *Env, key Key, up Upper) *Session {
	s := &Session{env: env, key: key, up: up, dataLen: env.dataLen, limit: 64, peerWnd: 64,
		slots: make([]sendSlot, min(minSlots, env.cfg.Window))}
	s.adm, _ = up.(Admitter)
	s.rack.init(&env.cfg)
	return s
}

// Key returns the session's name.
func (s *Session) Key() Key { return s.key }

// Start starts the session's idle clock: the peer has been heard from now.
func (s *Session) Start() { s.heardAt = s.env.Now }

// Dial has the session open itself: Timers sends OPEN at once, and again,
// backing off, until the peer answers (Opening turns false).
func (s *Session) Dial() {
	s.opening = true
	s.due = 0
	s.openWait = max(s.env.cfg.RTO, 10*time.Millisecond)
}

// Opening reports whether the session dialed and its peer has not
// answered yet.
func (s *Session) Opening() bool { return s.opening }

// Receiving reports whether a frame is partly received: the rest of it is
// on its way.
func (s *Session) Receiving() bool { return s.rx.active }

// Shut reports whether the receive window is shut for lack of room; any
// goroutine may call it, to ask for a Reopen after making room.
func (s *Session) Shut() bool { return s.shut.Load() }

// Ended reports whether End was called.
func (s *Session) Ended() bool { return s.ended }

// emit writes packet seq, which must be queued, into a transmit buffer.
// idx is the out index of its message. It reports false when the link has
// no free buffer.
func (s *Session) emit(seq uint32, idx int) bool {
	buf := s.env.tx.TxBuffer()
	if buf == nil {
		return false
	}
	om := s.out.at(idx)
	slot := s.slot(seq)
	h := PacketHeader{Type: TypeData, Session: s.key.ID, Seq: seq, Msg: om.no}
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
	s.env.queue(HeaderLen+int(h.Length), s.key.Peer)
	if s.maxSent == s.base {
		s.lastProgress = s.env.Now // the clock of the dead-peer check starts now
		s.dueBy(s.deadAt(s.lastProgress))
	}
	s.rack.sends++
	if now := s.clock(); seqLess(seq, s.maxSent) {
		slot.sentAt = 0 // resent: its acknowledgement is no round-trip sample (Karn)
		slot.xmitAt, slot.xmitN, slot.resent, slot.tx = now, s.rack.sends, true, h.Tx
		s.rack.logResent(seq)
		if slot.lost {
			slot.lost = false
			s.rack.lost--
		}
		s.env.Ctr.Resent.Add(1)
	} else {
		*slot = sendSlot{sentAt: now, xmitAt: now, xmitN: s.rack.sends}
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
func (s *Session) fillAck(h *PacketHeader) {
	h.Token = s.txToken
	h.Ack = s.expect
	h.Window = uint32(s.env.cfg.Window)
	if s.rxShut {
		h.Window = 0
	}
	if s.ooo != nil && s.ooo.held > 0 {
		h.Flags |= FlagGap
	}
	s.ackOwed = false
	s.framed = false
	s.ackAt = 0
	s.unacked = 0
}

// Control sends a packet without data: CLOSE (this end closes; the
// owner then calls End) or RESET (the owner ends the session for an
// error). Sessions send ACKs and OPENs themselves.
func (s *Session) Control(t PacketType) { s.control(t) }

// control sends a packet without data: ACK, OPEN, CLOSE or RESET. OPEN
// carries this end's datagram size in Offset.
func (s *Session) control(t PacketType) {
	buf := s.env.tx.TxBuffer()
	if buf == nil {
		return // the peer will ask again
	}
	h := PacketHeader{Type: t, Session: s.key.ID}
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
			// The bitmap stops at the size the peer agreed to take,
			// which may be less than this end's buffers.
			room := min(len(buf)-HeaderLen, s.dataLen)
			if n := s.ooo.sack(buf[HeaderLen:HeaderLen+room], s.expect); n > 0 {
				h.Flags |= FlagSack
				h.Length = uint16(n)
			}
		}
		s.env.Ctr.Acks.Add(1)
	case TypeOpen:
		h.Offset = uint64(s.env.maxPayload)
		h.Length = uint16(copy(buf[HeaderLen:], s.openAuth))
	}
	PutHeader(buf, &h)
	s.env.queue(HeaderLen+int(h.Length), s.key.Peer)
}

// Send puts m in the packet stream, giving it its packet numbers; Pump
// transmits it as the window allows. m.Done is called once every packet
// of m is acknowledged, or with the error that ended the session, or at
// once with the error that makes m unsendable (a frame beyond wire's
// bounds).
func (s *Session) Send(m *wire.Message) {
	d := uint64(s.dataLen)
	om := s.out.push()
	head, err := wire.AppendHead(s.headFor(om, m), m)
	if err != nil {
		s.out.size-- // give the slot back
		m.Complete(fmt.Errorf("afxdp: send to %v: %w", s.key.Peer, err))
		return
	}
	total := uint64(len(head)) + m.Header.PayloadLen
	*om = outMsg{m: m, head: head, total: total, first: s.assign, npk: uint32((total + d - 1) / d), no: s.msgNo}
	s.msgNo++
	if s.join(om) {
		return
	}
	s.assign += om.npk
	s.packLen = 0
	if om.npk == 1 {
		s.packLen = packedLen(om.total)
	}
}

// Pump transmits the packets found lost, then new ones as the window
// allows, at most budget in all, and reports how many it sent: budget
// means it may have more.
func (s *Session) Pump(budget int) int {
	sent := 0
	if s.rack.lost > 0 {
		sent = s.resendLost(budget)
	}
	for sent < budget && seqLess(s.next, s.assign) && seqLess(s.next, s.limit) &&
		seqLess(s.next, s.base+uint32(s.env.cfg.Window)) {
		for {
			om := s.out.at(s.nextIdx)
			if s.next-om.first < om.npk {
				break
			}
			s.nextIdx++
		}
		if s.next-s.base >= uint32(len(s.slots)) {
			s.growSlots()
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
func (s *Session) onAck(h *PacketHeader) {
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
			s.lastProgress = s.env.Now
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
		s.retireHead(om)
		s.out.pop()
		s.nextIdx = max(0, s.nextIdx-1)
	}
	if seqLess(s.next, a) {
		s.next, s.nextIdx = a, 0
	}
	s.progressed()
}

// progressed resets the timers after the peer acknowledged something new.
func (s *Session) progressed() {
	s.lastProgress = s.env.Now
	s.detectLoss()
	r := &s.rack
	r.afterRTO = false
	r.rto = r.rtoBase
	r.timer = timerNone
	s.armProbe()
}

// Timers runs the handshake, keepalive, acknowledgement, loss detection
// and dead-peer clocks against env.Now and returns the next time they
// need a look (0 for none). An error ends the session: the owner calls
// End with it. Until that time comes it returns at once: the owner calls
// it for every session on every turn that reads the clock.
func (s *Session) Timers() (int64, error) {
	if s.env.Now < s.due {
		if s.due == never {
			return 0, nil
		}
		return s.due, nil
	}
	next, err := s.timers()
	if err != nil {
		return 0, err
	}
	// The dead-peer checks need a look too, though nothing else may.
	if s.rx.active {
		next = earliest(next, s.deadAt(s.dataAt))
	}
	if s.base != s.maxSent {
		next = earliest(next, s.deadAt(s.lastProgress))
	}
	s.due = next
	if next == 0 {
		s.due = never
	}
	return next, nil
}

// Due returns when Timers next needs a look, as the session's sends since
// it last ran have moved that time (a retransmission timer armed): 0 for
// never, a time already past when it needs one now. An owner that sleeps
// until then misses none of its clocks.
func (s *Session) Due() int64 {
	switch s.due {
	case never:
		return 0
	case 0:
		return 1
	}
	return s.due
}

// deadAt is when the peer is given up for, counting from since: the first
// time more than DeadAfter after it.
func (s *Session) deadAt(since int64) int64 { return since + int64(s.env.cfg.DeadAfter) + 1 }

// timers is Timers' work, for a session whose due time has come.
func (s *Session) timers() (int64, error) {
	now := s.env.Now
	if s.opening {
		if now < s.openAt {
			return s.openAt, nil
		}
		s.control(TypeOpen)
		s.openWait = min(2*s.openWait, s.env.cfg.MaxRTO)
		s.openAt = now + int64(s.openWait)
		return s.openAt, nil
	}
	next, err := s.keepalive()
	if err != nil {
		return 0, err
	}
	if s.rx.active && time.Duration(now-s.dataAt) > s.env.cfg.DeadAfter {
		// A frame begun and not continued holds the memory its head
		// announced: a peer that means to send it sends, or probes.
		return 0, fmt.Errorf("afxdp: session %#x with %v: frame %d stalled for %v: %w",
			s.key.ID, s.key.Peer, s.rx.msg, s.env.cfg.DeadAfter, ErrPeerUnreachable)
	}
	if s.ackAt != 0 {
		if s.ackOwed && now >= s.ackAt {
			s.control(TypeAck) // nothing carried it in time
		} else if s.ackOwed {
			next = earliest(next, s.ackAt)
		} else {
			s.ackAt = 0
		}
	}
	if s.base == s.maxSent {
		return next, nil
	}
	if time.Duration(now-s.lastProgress) > s.env.cfg.DeadAfter {
		return 0, fmt.Errorf("afxdp: session %#x with %v: no acknowledgement for %v: %w",
			s.key.ID, s.key.Peer, s.env.cfg.DeadAfter, ErrPeerUnreachable)
	}
	r := &s.rack
	if r.reoAt != 0 && now >= r.reoAt {
		s.detectLoss()
	}
	if r.timer != timerNone && now >= r.timerAt {
		s.fireTimer()
	}
	return earliest(earliest(next, r.reoAt), r.timerAt), nil
}

// earliest is the earlier of two times, 0 (none) counting as later than
// any.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// onData takes a DATA packet: in order, it lands in its frame; ahead of
// order, it waits in the reorder buffer; behind, it is a duplicate. It
// reports whether the packet calls for an acknowledgement at once: one
// past a gap, a duplicate (the sender did not see an acknowledgement) or
// one left for lack of room (the window closes).
func (s *Session) onData(h *PacketHeader, data []byte) (urgent bool, err error) {
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
		return true, s.Reopen()
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
				s.env.ooo.put(buf) // a copy held when there was no room for it
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
		s.retireReorder()
	case seqLess(s.expect, h.Seq) && seqLess(h.Seq, s.expect+uint32(s.env.cfg.Window)):
		if !s.keep(h, data) {
			s.dsack, s.dsackOwed = h.Seq, true
			s.env.Ctr.Duplicates.Add(1)
		}
		s.sackOwed = true
		return true, nil
	case seqLess(h.Seq, s.expect):
		s.dsack, s.dsackOwed = h.Seq, true
		s.env.Ctr.Duplicates.Add(1)
		return true, nil
	default:
		s.env.Ctr.Duplicates.Add(1) // past the window: a confused peer
	}
	return false, nil
}

// keep holds a copy of packet h in the reorder buffer and reports whether
// it was new there.
func (s *Session) keep(h *PacketHeader, data []byte) bool {
	if s.ooo == nil {
		s.ooo = s.newReorder()
	}
	s.ooo.fit(h.Seq-s.expect, s.env.cfg.Window)
	return s.ooo.put(h, data, &s.env.ooo)
}

// takeHeld takes the held packets that now come in order, as far as there
// is room for them; it reports false when one had to stay.
func (s *Session) takeHeld() (bool, error) {
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
		s.env.ooo.put(buf)
		if err != nil {
			return false, err
		}
	}
	return true, nil
}

// isNew reports whether packet seq has not arrived before.
func (s *Session) isNew(seq uint32) bool {
	switch {
	case seq == s.expect:
		return !s.rxShut
	case seqLess(s.expect, seq) && seqLess(seq, s.expect+uint32(s.env.cfg.Window)):
		return s.ooo == nil || !s.ooo.has(seq)
	}
	return false
}

// accept lands the next in-order packet in its frame. It reports false,
// leaving the packet unaccepted, when a frame would complete but the
// delivery queue is full, or a frame would start but the memory it
// announces is not available (budget.go).
func (s *Session) accept(h *PacketHeader, data []byte) (bool, error) {
	if h.Flags&FlagPacked != 0 {
		return s.acceptPacked(h, data)
	}
	if h.Flags&FlagLast != 0 && !s.up.Room(1) {
		return false, nil
	}
	in, err := s.rx.feed(h, data, s, true)
	if err == errNoRoom {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("afxdp: session %#x from %v: %w", s.key.ID, s.key.Peer, err)
	}
	s.expect++
	if s.rx.active {
		s.dueBy(s.deadAt(s.dataAt)) // a frame begun: its stall check runs
	}
	if in != nil {
		s.framed = true
		s.up.Deliver(in)
	}
	return true, nil
}

// End finishes the session with err: every message it holds completes
// with err and the memory it holds is given back. It reports whether the
// session was still dialing. Calls after the first do nothing.
func (s *Session) End(err error) (wasOpening bool) {
	if s.ended {
		return false
	}
	s.ended = true
	for s.out.len() > 0 {
		s.out.at(0).finished(err)
		s.retireHead(s.out.at(0))
		s.out.pop()
	}
	if c := s.rx.reset(); c > 0 {
		s.Release(c)
	}
	if s.ooo != nil {
		s.ooo.free(&s.env.ooo)
		s.ooo = nil
	}
	if s.memWait {
		// RetryMemory forgets it; the waiting count goes with it.
		s.env.Mem.freed.Store(true)
	}
	wasOpening, s.opening = s.opening, false
	return wasOpening
}

// openAck answers an OPEN: an ACK whose Offset is this end's datagram size,
// flagged FlagSize, so the dialer learns the size both ends can carry.
func (s *Session) openAck() {
	buf := s.env.tx.TxBuffer()
	if buf == nil {
		return // the dialer repeats its OPEN
	}
	h := PacketHeader{Type: TypeAck, Session: s.key.ID, Flags: FlagSize, Offset: uint64(s.env.maxPayload)}
	s.fillAck(&h)
	PutHeader(buf, &h)
	s.env.queue(HeaderLen, s.key.Peer)
}

// Agree takes the peer's datagram size from an OPEN or its answer.
// A frame's first packet must hold its fixed header whole (frameClaim):
// sizes below that are not believed (no link carries so little).
func (s *Session) Agree(peerMax uint64) {
	if peerMax >= HeaderLen+minData && peerMax-HeaderLen < uint64(s.dataLen) {
		s.dataLen = int(peerMax - HeaderLen)
	}
}

// minData is the least data a packet must be able to carry.
const minData = wire.HeaderSize + packedLenBytes
