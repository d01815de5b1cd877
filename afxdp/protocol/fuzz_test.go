package protocol_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// FuzzSessions runs a program of actions, the fuzz input, on two sessions
// joined by a fake network, with a fake clock and no goroutines, so that a
// failing input fails the same way every time. The actions: either end
// sends a frame; a packet in flight is delivered, dropped, duplicated or
// swapped with another; the clock advances; an end closes, is reset by a
// RESET (or receives a forged one, without the session's token, which it
// must drop), or has its receiver take the frames delivered to it (until then
// they hold delivery room and memory, which shuts windows). After the
// program, the network delivers everything and the clock runs until every
// message completed. The program moves the clock less than the
// dead-peer timeout in all, so no session may end for want of answers.
// Checked throughout: every frame delivered is the one
// sent next, byte for byte (so none is lost, reordered or delivered
// twice), no packet exceeds its receiver's datagram size, every packet
// of the other end carries its session's token (the OPEN a MAC that
// checks) and no forged one does, every message
// completes once, and one that completes without error was delivered;
// after the program, both ends alive, every message completed without
// error, and an end that ended was closed or reset by a peer that was.
func FuzzSessions(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		if len(prog) > 4096 {
			prog = prog[:4096]
		}
		runProgram(t, prog)
	})
}

// Actions of a program, each an opcode byte followed by its arguments.
const (
	opSendA    = iota // size: A sends a frame
	opSendB           // size: B sends a frame
	opDeliver         // dir, index: the packet arrives
	opDrop            // dir, index: the packet is lost
	opDup             // dir, index: the packet is duplicated in flight
	opSwap            // dir, i, j: two packets change places
	opAdvance         // d: the clock moves d·100µs, or to the next timer (255)
	opClose           // side: that end closes
	opReset           // side: that end receives a RESET, forged with side&2
	opConsume         // side: that end's receiver takes its frames
	opFlushNet        // every packet in flight arrives, in order
	opCount
)

var (
	addrA = netip.MustParseAddrPort("198.18.0.1:7000")
	addrB = netip.MustParseAddrPort("198.18.0.2:7000")
)

const sessionID = 0x5157

// world is the two ends, the network between them and the clock.
type world struct {
	t     *testing.T
	now   time.Time
	start time.Time
	// spare is how far the program may still move the clock: less than
	// Config.DeadAfter in all, so that no session may end unreachable.
	spare time.Duration
	ends  [2]*end
	cfg   protocol.Config
	ring  *protocol.Keyring // the ticket A opens the session under
}

// end is one side: its Env and Session, what it sent and what it was
// delivered.
type end struct {
	w         *world
	i         int
	addr      netip.AddrPort
	env       *protocol.Env
	s         *protocol.Session // nil for B until A's OPEN comes
	tx        *fakeTx
	maxPay    int
	up        *recorder
	promoted  bool     // B: the dialer's first packet after OPEN came
	sent      []*sent  // everything this end sent, by call id
	ended     error    // why the session ended
	inflight  [][]byte // packets this end sent, on their way to the other
	delivered int      // frames of the other end's delivered here
	txTok     uint64   // the session's token for this end's packets
	rxTok     uint64   // and for the other's
	forging   bool     // the packet being received is forged
}

// sent is a frame one end sent and how it completed.
type sent struct {
	m     wire.Message
	meta  []byte
	data  []byte
	done  int
	err   error
	owner *end
}

func (x *sent) Sent(m *wire.Message, err error) {
	e := x.owner
	x.done++
	x.err = err
	if x.done > 1 {
		e.w.t.Fatalf("%s: message %d completed %d times", e.name(), m.Header.CallID, x.done)
	}
	if err == nil && e.peer().delivered <= int(m.Header.CallID) {
		e.w.t.Fatalf("%s: message %d completed before its delivery (%d delivered)", e.name(), m.Header.CallID, e.peer().delivered)
	}
}

// fakeTx collects an end's packets on the network, with room for a
// bounded number in flight.
type fakeTx struct {
	e   *end
	buf []byte
}

const maxInflight = 1024

func (tx *fakeTx) TxBuffer() []byte {
	if len(tx.e.inflight) >= maxInflight {
		return nil
	}
	return tx.buf
}

func (tx *fakeTx) Queue(n int, to netip.AddrPort) {
	if to != tx.e.peer().addr {
		tx.e.w.t.Fatalf("%s: packet to %v", tx.e.name(), to)
	}
	tx.e.inflight = append(tx.e.inflight, bytes.Clone(tx.buf[:n]))
}

// recorder is an end's Upper: it checks each frame as it is delivered and
// holds it, with its memory, until the receiver consumes it.
type recorder struct {
	e       *end
	room    int
	frames  []*wire.Inbound
	recheck bool
}

func (r *recorder) Room(n int) bool         { return r.room-len(r.frames) >= n }
func (r *recorder) Receiver() wire.Receiver { return pooledReceiver{} }
func (r *recorder) Recheck()                { r.recheck = true }

func (r *recorder) Deliver(in *wire.Inbound) {
	e := r.e
	from := e.peer()
	id := int(in.Header.CallID)
	if id != e.delivered || id >= len(from.sent) {
		e.w.t.Fatalf("%s: frame %d delivered, frame %d due (%d sent)", e.name(), id, e.delivered, len(from.sent))
	}
	x := from.sent[id]
	if in.Err != nil {
		e.w.t.Fatalf("%s: frame %d: %v", e.name(), id, in.Err)
	}
	var got []byte
	for _, tn := range in.Tensors {
		got = append(got, tn.Data...)
	}
	if !bytes.Equal(in.Meta, x.meta) || !bytes.Equal(got, x.data) {
		e.w.t.Fatalf("%s: frame %d differs from what was sent", e.name(), id)
	}
	e.delivered++
	if len(r.frames) >= r.room {
		e.w.t.Fatalf("%s: frame %d delivered past the room announced", e.name(), id)
	}
	r.frames = append(r.frames, in)
}

// consume hands the frames on, releasing their memory.
func (r *recorder) consume() {
	for _, in := range r.frames {
		if s := r.e.s; s != nil {
			s.Release(protocol.ClaimOf(in))
		}
		in.Release()
	}
	clear(r.frames)
	r.frames = r.frames[:0]
	r.recheck = true
}

type pooledReceiver struct{}

func (pooledReceiver) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (pooledReceiver) Deliver(in *wire.Inbound)     { in.Release() }

func (e *end) name() string { return string(rune('A' + e.i)) }
func (e *end) peer() *end   { return e.w.ends[1-e.i] }

// program reads bytes off a fuzz input, zero once it runs out.
type program struct{ b []byte }

func (p *program) next() byte {
	if len(p.b) == 0 {
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

func runProgram(t *testing.T, prog []byte) *world {
	p := &program{b: prog}
	w := newWorld(t, p)
	for ops := 0; len(p.b) > 0 && ops < 1000; ops++ {
		w.do(p)
		w.step()
	}
	w.settle()
	return w
}

// newWorld makes the two ends as the program's first bytes configure
// them, and has A dial B.
func newWorld(t *testing.T, p *program) *world {
	windows := [...]int{4, 16, 64, 512}
	w := &world{t: t, now: time.Unix(1_700_000_000, 0)}
	w.start = w.now
	w.cfg = protocol.Config{
		Window: windows[p.next()%4], RTO: 4 * time.Millisecond, MaxRTO: 200 * time.Millisecond,
		DeadAfter: 5 * time.Second, AckDelay: 20 * time.Microsecond, IdleTimeout: 30 * time.Second,
		SessionMemory: 64 << 10,
	}
	w.cfg.AckEvery = max(w.cfg.Window/8, 1)
	w.spare = w.cfg.DeadAfter / 2
	w.cfg.EndpointMemory = w.cfg.SessionMemory * int64(1+p.next()%4)
	for i := range w.ends {
		maxPay := protocol.HeaderLen + wire.HeaderSize + 2 + 6*int(p.next())
		e := &end{w: w, i: i, addr: [2]netip.AddrPort{addrA, addrB}[i], maxPay: maxPay}
		e.tx = &fakeTx{e: e, buf: make([]byte, maxPay)}
		e.up = &recorder{e: e, room: 1 + int(p.next()%64)}
		// Never less than a packet's frames, as afxdp.Options.Deliveries.
		e.up.room = max(e.up.room, protocol.MaxPacked(maxPay-protocol.HeaderLen))
		e.env = protocol.NewEnv(w.cfg, e.tx, maxPay, w.now.UnixNano())
		w.ends[i] = e
	}
	// The session opens under a ticket, as afxdp's Dial does.
	w.ring = protocol.NewKeyring(protocol.Ticket{ID: 77, Secret: [protocol.SecretLen]byte{1, 2, 3}})
	clock := w.now.UnixNano()
	dialer, listener := w.ring.Tokens(sessionID, clock)
	w.ends[0].txTok, w.ends[0].rxTok = dialer, listener
	w.ends[1].txTok, w.ends[1].rxTok = listener, dialer
	a := w.ends[0]
	a.s = protocol.NewSession(a.env, protocol.Key{Peer: addrB, ID: sessionID}, a.up)
	a.s.Authenticate(dialer, listener, w.ring.SealOpen(sessionID, uint64(a.maxPay), clock))
	a.s.Start()
	a.s.Dial()
	w.step()
	return w
}

// TestSessionsPrograms checks that the seed programs move what they send,
// so that FuzzSessions checks something: a harness that delivered nothing
// would pass every input.
func TestSessionsPrograms(t *testing.T) {
	for i, seed := range fuzzSeeds() {
		w := runProgram(t, seed)
		a, b := w.ends[0], w.ends[1]
		t.Logf("seed %d: %s", i, w.state())
		if a.ended == nil && b.ended == nil && (b.delivered != len(a.sent) || a.delivered != len(b.sent) || len(a.sent) == 0) {
			t.Errorf("seed %d: %s", i, w.state())
		}
	}
}

// do runs the program's next action.
func (w *world) do(p *program) {
	op := p.next() % opCount
	switch op {
	case opSendA, opSendB:
		w.ends[op-opSendA].send(p.next(), p.next())
	case opDeliver, opDrop, opDup:
		src := w.ends[p.next()%2]
		if len(src.inflight) == 0 {
			p.next()
			return
		}
		i := int(p.next()) % len(src.inflight)
		pkt := src.inflight[i]
		switch op {
		case opDeliver:
			src.inflight = append(src.inflight[:i], src.inflight[i+1:]...)
			src.peer().receive(pkt)
		case opDrop:
			src.inflight = append(src.inflight[:i], src.inflight[i+1:]...)
		case opDup:
			if len(src.inflight) < maxInflight {
				src.inflight = append(src.inflight, bytes.Clone(pkt))
			}
		}
	case opSwap:
		src := w.ends[p.next()%2]
		i, j := int(p.next()), int(p.next())
		if n := len(src.inflight); n > 0 {
			src.inflight[i%n], src.inflight[j%n] = src.inflight[j%n], src.inflight[i%n]
		}
	case opAdvance:
		d := time.Duration(p.next()) * 100 * time.Microsecond
		if d == 255*100*time.Microsecond {
			d = w.nextTimer().Sub(w.now)
		}
		if d > 0 && d <= w.spare {
			w.spare -= d
			w.now = w.now.Add(d)
		}
	case opClose:
		e := w.ends[p.next()%2]
		if e.s != nil && e.ended == nil {
			e.s.Control(protocol.TypeClose)
			e.s.Control(protocol.TypeClose)
			e.end(fmt.Errorf("session closed: %w", protocol.ErrClosed))
		}
	case opReset:
		side := p.next()
		e := w.ends[side%2]
		// A genuine RESET echoes the token of e's packets; a forged one
		// has another.
		h := protocol.PacketHeader{Type: protocol.TypeReset, Session: sessionID, Token: e.txTok}
		if side&2 != 0 {
			h.Token = ^e.txTok
			e.forging = true
		}
		b := make([]byte, protocol.HeaderLen)
		protocol.PutHeader(b, &h)
		e.receive(b)
		e.forging = false
	case opConsume:
		w.ends[p.next()%2].up.consume()
	case opFlushNet:
		w.flushNet()
	}
}

// send has e send a frame of a size the arguments choose: some metadata,
// and a tensor of up to 16 KiB. An end sends only once its session is
// usable, as afxdp hands out a Conn only then.
func (e *end) send(a, b byte) {
	if !e.usable() {
		return
	}
	id := len(e.sent)
	meta := make([]byte, int(a%32))
	size := int(b) * int(b) / 4
	if b%5 == 0 {
		size = int(b % 40) // small frames, which travel packed
	}
	data := make([]byte, size)
	for k := range meta {
		meta[k] = byte(id*7 + k)
	}
	for k := range data {
		data[k] = byte(id*13 + k*31 + e.i)
	}
	x := &sent{meta: meta, data: data, owner: e}
	x.m = wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(id)}, Meta: meta, Done: x}
	if size > 0 {
		x.m.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}
	}
	e.sent = append(e.sent, x)
	e.s.Send(&x.m)
}

// usable reports whether e's session takes messages: the handshake is
// done, as a Conn is handed out only then.
func (e *end) usable() bool {
	if e.s == nil || e.ended != nil {
		return false
	}
	if e.i == 0 {
		return !e.s.Opening()
	}
	return e.promoted
}

// live reports whether e's session runs: not ended and, for B, past the
// half-open state, in which afxdp's endpoint keeps no session, only an
// answer to OPEN.
func (e *end) live() bool {
	return e.s != nil && e.ended == nil && (e.i == 0 || e.promoted)
}

// receive takes a packet from the network as afxdp's endpoint does.
func (e *end) receive(pkt []byte) {
	h, data, err := protocol.DecodeHeader(pkt)
	if err != nil {
		e.w.t.Fatalf("%s: a packet of the other end: %v", e.name(), err)
	}
	if len(pkt) > e.maxPay {
		e.w.t.Fatalf("%s: %v packet of %d bytes, more than the %d agreed", e.name(), h.Type, len(pkt), e.maxPay)
	}
	if e.s == nil && h.Type == protocol.TypeOpen && !e.forging {
		// What afxdp's open and promote do: the OPEN authenticated, a
		// session sized to both ends.
		if _, err := e.w.ring.VerifyOpen(&h, data, e.w.now); err != nil {
			e.w.t.Fatalf("%s: A's OPEN: %v", e.name(), err)
		}
		e.s = protocol.NewSession(e.env, protocol.Key{Peer: addrA, ID: sessionID}, e.up)
		e.s.Authenticate(e.txTok, e.rxTok, nil)
		e.s.Agree(h.Offset)
		e.s.Start()
	}
	if e.s == nil || e.ended != nil {
		if h.Type != protocol.TypeReset && h.Type != protocol.TypeClose && h.Type != protocol.TypeOpen {
			b := e.tx.TxBuffer()
			if b != nil {
				protocol.PutHeader(b, &protocol.PacketHeader{Type: protocol.TypeReset, Session: sessionID, Token: h.Token})
				e.tx.Queue(protocol.HeaderLen, e.peer().addr)
			}
		}
		return
	}
	if ok := e.s.Authentic(&h); ok == e.forging {
		e.w.t.Fatalf("%s: %v packet with token %#x (forged %v) taken as authentic: %v", e.name(), h.Type, h.Token, e.forging, ok)
	} else if !ok {
		return // dropped, as afxdp's endpoint does
	}
	e.env.Now = e.w.now.UnixNano()
	if h.Type != protocol.TypeOpen {
		e.promoted = true
	}
	if err := e.s.Handle(&h, data); err != nil {
		e.end(err)
	}
}

// end ends e's session; every message it sent completes.
func (e *end) end(err error) {
	e.ended = err
	e.s.End(err)
}

// step is an owner's step on each end: reopen what asked, retry memory,
// run the timers, transmit, acknowledge.
func (w *world) step() {
	for _, e := range w.ends {
		if !e.live() {
			continue
		}
		e.env.Now = w.now.UnixNano()
		if e.up.recheck {
			e.up.recheck = false
			if err := e.s.Reopen(); err != nil {
				e.s.Control(protocol.TypeReset)
				e.end(err)
				continue
			}
		}
		if e.env.Mem.Freed() {
			e.env.RetryMemory(func(_ *protocol.Session, err error) { e.end(err) })
			if e.ended != nil {
				continue
			}
		}
		if _, err := e.s.Timers(); err != nil {
			e.end(err)
			continue
		}
		for range 64 {
			if e.s.Pump(64) < 64 {
				break
			}
		}
		e.env.FlushAcks()
	}
}

// toNextTimer moves the clock to the earliest timer of the live ends.
func (w *world) toNextTimer() {
	if next := w.nextTimer(); next.After(w.now) {
		w.now = next
	}
}

// nextTimer returns the earliest timer of the live ends, running those
// due.
func (w *world) nextTimer() time.Time {
	var next time.Time
	for _, e := range w.ends {
		if !e.live() {
			continue
		}
		e.env.Now = w.now.UnixNano()
		t, err := e.s.Timers()
		if err != nil {
			e.end(err)
			continue
		}
		if at := time.Unix(0, t); t != 0 && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	return next
}

// flushNet delivers every packet in flight, in order, both ways, and
// what those bring about, a bounded number of rounds.
func (w *world) flushNet() {
	for range 64 {
		moved := false
		for _, e := range w.ends {
			pkts := e.inflight
			e.inflight = nil
			for _, pkt := range pkts {
				e.peer().receive(pkt)
				moved = true
			}
		}
		w.step()
		if !moved {
			return
		}
	}
}

// settled reports whether every message has completed and nothing is in
// flight.
func (w *world) settled() bool {
	for _, e := range w.ends {
		if len(e.inflight) > 0 {
			return false
		}
		for _, x := range e.sent {
			if x.done == 0 {
				return false
			}
		}
	}
	return true
}

// settle runs the network without faults, and the clock from timer to
// timer, until the ends are done, and checks how they ended.
func (w *world) settle() {
	for _, e := range w.ends {
		e.up.consume()
	}
	limit := w.now.Add(2*w.cfg.IdleTimeout + 2*w.cfg.DeadAfter)
	for !w.settled() {
		if w.now.After(limit) {
			w.t.Fatalf("not settled by %v: %s", w.now.Sub(w.start), w.state())
		}
		w.step()
		w.flushNet()
		for _, e := range w.ends {
			e.up.consume()
		}
		w.step()
		if len(w.ends[0].inflight)+len(w.ends[1].inflight) == 0 {
			before := w.now
			w.toNextTimer()
			if !w.now.After(before) {
				w.now = w.now.Add(time.Millisecond)
			}
		}
	}
	for _, e := range w.ends {
		if e.ended != nil || e.peer().ended != nil {
			continue
		}
		for id, x := range e.sent {
			if x.err != nil {
				w.t.Fatalf("%s: message %d failed on a live session: %v", e.name(), id, x.err)
			}
		}
	}
	for _, e := range w.ends {
		// Never ErrPeerUnreachable: the program moved the clock less
		// than DeadAfter, and afterwards the network is perfect.
		if e.ended != nil && !errors.Is(e.ended, protocol.ErrClosed) && !errors.Is(e.ended, protocol.ErrReset) &&
			!errors.Is(e.ended, protocol.ErrPeerClosed) {
			w.t.Fatalf("%s: ended with %v", e.name(), e.ended)
		}
		e.up.consume()
	}
}

func (w *world) state() string {
	var b bytes.Buffer
	for _, e := range w.ends {
		done := 0
		for _, x := range e.sent {
			if x.done > 0 {
				done++
			}
		}
		fmt.Fprintf(&b, "%s: sent %d, completed %d, delivered %d, in flight %d, ended %v; ",
			e.name(), len(e.sent), done, e.delivered, len(e.inflight), e.ended)
	}
	return b.String()
}

// fuzzSeeds are programs that exercise each action: a clean exchange,
// loss, duplication, reordering, flow control, closing and resetting.
func fuzzSeeds() [][]byte {
	cfg := func(win, mem, mtuA, roomA, mtuB, roomB byte) []byte {
		return []byte{win, mem, mtuA, roomA, mtuB, roomB}
	}
	seeds := [][]byte{
		// Handshake, a few frames each way, small ones packed.
		append(cfg(2, 0, 240, 63, 240, 63), opFlushNet, opSendA, 3, 10, opSendA, 4, 5, opSendB, 1, 200, opSendA, 0, 15, opFlushNet),
		// Loss of every other packet, timers resend.
		append(cfg(1, 1, 40, 10, 200, 10), opFlushNet, opSendA, 9, 250, opDrop, 0, 0, opDrop, 0, 3, opAdvance, 255, opFlushNet, opAdvance, 255, opFlushNet),
		// Duplicates and swaps, both ways.
		append(cfg(0, 2, 100, 1, 100, 1), opFlushNet, opSendA, 1, 120, opSendB, 2, 90, opDup, 0, 1, opSwap, 0, 0, 2, opSwap, 1, 0, 1, opDeliver, 0, 2, opDeliver, 1, 0, opFlushNet),
		// Flow control: a receiver that does not consume, tiny memory.
		append(cfg(3, 0, 250, 0, 250, 0), opFlushNet, opSendA, 5, 254, opSendA, 6, 254, opSendA, 7, 254, opFlushNet, opAdvance, 255, opConsume, 1, opFlushNet),
		// Close mid-stream, and a RESET.
		append(cfg(2, 3, 150, 5, 120, 5), opFlushNet, opSendA, 1, 200, opSendB, 1, 200, opDeliver, 0, 0, opClose, 0, opSendA, 1, 1, opFlushNet),
		append(cfg(2, 3, 150, 5, 120, 5), opFlushNet, opSendB, 3, 100, opDeliver, 1, 0, opReset, 1, opFlushNet),
		// The OPEN and its answer lost.
		append(cfg(1, 0, 80, 5, 80, 5), opDrop, 0, 0, opAdvance, 255, opDeliver, 0, 0, opDrop, 1, 0, opAdvance, 255, opFlushNet, opSendA, 1, 2, opFlushNet),
	}
	return seeds
}
