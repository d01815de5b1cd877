package afxdp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// rawPeer speaks the protocol by hand on one end of a MemLink, so a test
// can send what no Endpoint would: frame heads whose bytes never follow.
type rawPeer struct {
	l   *link.MemLink
	to  netip.AddrPort
	rx  [64]link.Datagram
	tok map[uint64]uint64 // the tokens of the sessions it opened, by id
	// sent counts the datagrams send sent: what the endpoint will have
	// received once they have all arrived.
	sent uint64
}

// send sends a packet; one without a token gets its session's.
func (p *rawPeer) send(t *testing.T, h protocol.PacketHeader, data []byte) {
	t.Helper()
	if h.Token == 0 {
		h.Token = p.tok[h.Session]
	}
	h.Length = uint16(len(data))
	buf := p.l.TxBuffer()
	protocol.PutHeader(buf, &h)
	copy(buf[protocol.HeaderLen:], data)
	p.l.Queue(protocol.HeaderLen+len(data), p.to)
	if err := p.l.Flush(); err != nil {
		t.Fatal(err)
	}
	p.sent++
}

// await receives until a packet for session id satisfies ok.
func (p *rawPeer) await(t *testing.T, id uint64, what string, ok func(protocol.PacketHeader) bool) {
	t.Helper()
	testwait.Eventually(t, settle, func() bool {
		n, err := p.l.Receive(p.rx[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.rx[:n] {
			if h, _, err := protocol.DecodeHeader(d.Data); err == nil && h.Session == id && ok(h) {
				return true
			}
		}
		return false
	}, "session %d: a %s", id, what)
}

// open completes the handshake of session id, under testTicket.
func (p *rawPeer) open(t *testing.T, id uint64) {
	t.Helper()
	h, auth := p.authOpen(id, 1472)
	p.send(t, h, auth)
	p.await(t, id, "answer to OPEN", func(h protocol.PacketHeader) bool { return h.Flags&protocol.FlagSize != 0 })
	p.send(t, protocol.PacketHeader{Type: protocol.TypeAck, Session: id, Window: 64}, nil)
}

// authOpen returns an OPEN of session id under testTicket, as Dial
// sends it, and records the session's token.
func (p *rawPeer) authOpen(id, size uint64) (protocol.PacketHeader, []byte) {
	r := protocol.NewKeyring(*testTicket)
	ts := time.Now().UnixNano()
	dialer, _ := r.Tokens(id, ts)
	if p.tok == nil {
		p.tok = make(map[uint64]uint64)
	}
	p.tok[id] = dialer
	return protocol.PacketHeader{Type: protocol.TypeOpen, Session: id, Window: 64, Offset: size, Token: dialer}, r.SealOpen(id, size, ts)
}

// head is the head of a frame carrying one tensor of size bytes, whose
// data never follows: only the announcement.
func head(t *testing.T, size uint64) []byte {
	t.Helper()
	m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{1}, Data: []byte{0}}}}
	b, err := wire.AppendHead(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	// Announce size bytes: the header's payload length, and the
	// descriptor's byte length and shape.
	binary.LittleEndian.PutUint64(b[32:], size)
	binary.LittleEndian.PutUint64(b[wire.HeaderSize+8:], size)
	binary.LittleEndian.PutUint64(b[wire.HeaderSize+16:], size)
	return b
}

// TestFrameHeadsCannotTakeMemory: a peer sends only the first packet of
// frames whose heads announce large tensors. The endpoint's memory stays
// within EndpointMemory (the frames beyond it wait, their windows shut), a
// head announcing more than SessionMemory, or 4 GiB, takes nothing, and
// the stalled frames' sessions end after DeadAfter, returning every pooled
// buffer. On fake time: DeadAfter passes when everything waits, never
// while the sessions are still being opened, however slow the machine.
func TestFrameHeadsCannotTakeMemory(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		const mib = 1 << 20
		opts := fakeOptions(afxdp.Options{SessionMemory: 4 * mib, EndpointMemory: 8 * mib, DeadAfter: 3 * time.Second})
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		srv := afxdp.NewEndpoint(la, opts)
		acceptAll(t, srv)
		live := bufpool.Live()
		p := &rawPeer{l: lb, to: memA}
		start := time.Now()

		for id := uint64(1); id <= 6; id++ {
			p.open(t, id)
			p.send(t, protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Session: id, Window: 64}, head(t, 3*mib))
		}
		st := testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Deferred >= 4 }, "frame heads taken")
		if st.Buffered > uint64(opts.EndpointMemory) || st.Buffered < 6*mib {
			t.Fatalf("%d bytes held for 6 heads of 3 MiB, endpoint bound %d", st.Buffered, opts.EndpointMemory)
		}
		if n := bufpool.Live() - live; n > 2 {
			t.Fatalf("%d pooled buffers taken by 6 frame heads, 2 fit", n)
		}

		// Heads beyond SessionMemory, or 4 GiB, take nothing: their frames
		// are to be dropped as they come (TestFrameTooLargeFailsItsCallOnly).
		for id, size := range map[uint64]uint64{7: 5 * mib, 8: 4 << 30} {
			p.open(t, id)
			want := srv.Stats().Received + 1
			p.send(t, protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Session: id, Window: 64}, head(t, size))
			testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Received >= want }, "the head received")
		}
		if st2 := srv.Stats(); st2.Buffered != st.Buffered || bufpool.Live()-live > 2 {
			t.Fatalf("heads beyond SessionMemory took memory: %d bytes held, was %d; %d pooled buffers", st2.Buffered, st.Buffered, bufpool.Live()-live)
		}
		if d := time.Since(start); d >= opts.DeadAfter {
			t.Fatalf("the heads took %v of fake time, DeadAfter %v", d, opts.DeadAfter)
		}

		st = testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Sessions == 0 }, "stalled frames dropped")
		// The sessions end once DeadAfter passes with their peer silent,
		// and not much later.
		if d := time.Since(start); d < opts.DeadAfter || d > opts.DeadAfter+time.Second {
			t.Fatalf("the stalled sessions ended after %v of fake time, DeadAfter %v", d, opts.DeadAfter)
		}
		if st.Buffered != 0 {
			t.Fatalf("%d bytes still held with no session", st.Buffered)
		}
		if n := bufpool.Live() - live; n != 0 {
			t.Fatalf("%d pooled buffers not returned", n)
		}
		t.Logf("%+v", st)
	})
}

// TestFramesWaitForMemory: three sessions send 3 MiB tensors at once to an
// endpoint whose sessions may hold 4 MiB in all. Frames that do not fit
// wait, their windows shut, and all arrive intact.
func TestFramesWaitForMemory(t *testing.T) {
	const mib = 1 << 20
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, SessionMemory: 4 * mib, EndpointMemory: 4 * mib})
	t.Cleanup(func() { ea.Close(); eb.Close() })
	const sessions, frames = 3, 4
	data := pattern(3*mib, 1)
	rb := newCollector(sessions * frames)
	done := make(doneChan, sessions*frames)
	for range sessions {
		ca, cb := session(t, ea, eb)
		go cb.Receive(rb)
		for i := range frames {
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i)}, Done: done,
				Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}}
			if err := ca.Send(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range sessions * frames {
		in := rb.next(t, 20*time.Second)
		if in.Err != nil || string(in.Tensors[0].Data) != string(data) {
			t.Fatalf("frame %d: %v, or its tensor differs", in.Header.CallID, in.Err)
		}
		in.Release()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	st := eb.Stats()
	t.Logf("%+v", st)
	if st.Deferred == 0 {
		t.Fatal("no frame waited for memory")
	}
	if st.Buffered != 0 {
		t.Fatalf("%d bytes still held with every frame delivered", st.Buffered)
	}
}

// TestBacklogReleasedOnClose: frames that arrived for sessions no one
// accepted give their pooled buffers back when the endpoint closes.
func TestBacklogReleasedOnClose(t *testing.T) {
	live := bufpool.Live()
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket})
	defer ea.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := ea.Dial(ctx, memB.String())
	if err != nil {
		t.Fatal(err)
	}
	done := make(doneChan, 3)
	data := pattern(100_000, 2)
	for i := range 3 {
		if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i)}, Done: done,
			Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := bufpool.Live() - live; n < 3 {
		t.Fatalf("%d pooled buffers held for 3 frames no one received", n)
	}
	eb.Close()
	if n := bufpool.Live() - live; n != 0 {
		t.Fatalf("%d pooled buffers not returned after close", n)
	}
}

// TestFrameTooLargeFailsItsCallOnly: a frame larger than the receiver's
// SessionMemory is read and dropped as it comes, and delivered bare with
// an error wrapping wire.ErrTooLarge; the session carries on.
func TestFrameTooLargeFailsItsCallOnly(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.02, Seed: 9})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, SessionMemory: 1 << 20})
	t.Cleanup(func() { ea.Close(); eb.Close() })
	live := bufpool.Live()
	ca, cb := session(t, ea, eb)
	rb := newCollector(2)
	go cb.Receive(rb)
	done := make(doneChan, 2)
	big := pattern(2<<20, 3)
	for i, data := range [][]byte{big, big[:1000]} {
		if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 5, CallID: uint64(i + 1)}, Meta: []byte("m"), Done: done,
			Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}}); err != nil {
			t.Fatal(err)
		}
	}
	in := rb.next(t, 10*time.Second)
	if !errors.Is(in.Err, wire.ErrTooLarge) || in.Header.CallID != 1 || in.Header.Method != 5 || len(in.Tensors) != 0 {
		t.Fatalf("frame too large delivered as call %d method %d, %d tensors, err %v", in.Header.CallID, in.Header.Method, len(in.Tensors), in.Err)
	}
	in.Release()
	in = rb.next(t, 10*time.Second)
	if in.Err != nil || in.Header.CallID != 2 || string(in.Tensors[0].Data) != string(big[:1000]) {
		t.Fatalf("the next frame: call %d, err %v", in.Header.CallID, in.Err)
	}
	in.Release()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := bufpool.Live() - live; n != 0 {
		t.Fatalf("%d pooled buffers held", n)
	}
}

// TestHalfOpenExpiresOnTime: OPENs whose handshakes are never completed
// hold their half-open sessions until HandshakeTimeout has passed, and
// not after: on fake time, where the reactor is never late, the expiry
// is exact (the flood tests, over kernel sockets, can only wait for it).
func TestHalfOpenExpiresOnTime(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		srv := afxdp.NewEndpoint(la, fakeOptions(afxdp.Options{HandshakeTimeout: timeout}))
		acceptAll(t, srv)
		p := &rawPeer{l: lb, to: memA}
		start := time.Now()
		for id := uint64(1); id <= 3; id++ {
			h, auth := p.authOpen(id, 1472)
			p.send(t, h, auth)
		}
		synctest.Wait() // the OPENs handled, their answers sent
		if st := srv.Stats(); st.HalfOpen != 3 || st.Sessions != 0 {
			t.Fatalf("after 3 OPENs: %+v, want 3 half-open and no session", st)
		}
		time.Sleep(timeout - time.Millisecond - time.Since(start)) // synctest's clock: to just before the timeout
		synctest.Wait()
		if st := srv.Stats(); st.HalfOpen != 3 || st.Expired != 0 {
			t.Fatalf("a millisecond before HandshakeTimeout: %+v, want 3 half-open, none expired", st)
		}
		time.Sleep(2 * time.Millisecond) // synctest's clock: past the timeout
		synctest.Wait()
		if st := srv.Stats(); st.HalfOpen != 0 || st.Expired != 3 || st.Sessions != 0 {
			t.Fatalf("a millisecond after HandshakeTimeout: %+v, want none half-open, 3 expired", st)
		}
	})
}
