package afxdp_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// frames records the frames a Conn delivers, by their metadata.
type frames chan string

func (f frames) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (f frames) Deliver(in *wire.Inbound) {
	select {
	case f <- string(in.Meta):
	default:
	}
	in.Release()
}

// authServer starts an endpoint holding testTicket on one end of a MemPair
// and returns it, a raw peer on the other end and the Conns it accepts.
func authServer(t *testing.T, opts afxdp.Options) (*afxdp.Endpoint, *rawPeer, chan *afxdp.Conn) {
	t.Helper()
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	srv := afxdp.NewEndpoint(la, opts)
	conns := make(chan *afxdp.Conn, 16)
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() { srv.Close(); lb.Close() })
	return srv, &rawPeer{l: lb, to: memA}, conns
}

// answered receives until the answer to session marker's OPEN, which
// comes after the answers to anything sent before it (the link keeps
// order), and returns the sessions of every packet before it.
func (p *rawPeer) answered(t *testing.T, marker uint64) map[uint64]bool {
	t.Helper()
	seen := map[uint64]bool{}
	testwait.Eventually(t, settle, func() bool {
		n, err := p.l.Receive(p.rx[:])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.rx[:n] {
			h, _, err := protocol.DecodeHeader(d.Data)
			if err != nil {
				continue
			}
			if h.Session == marker && h.Flags&protocol.FlagSize != 0 {
				return true
			}
			seen[h.Session] = true
		}
		return false
	}, "an answer to OPEN of session %d", marker)
	return seen
}

// TestSpoofedOpenDropped sends OPENs without a ticket, under a ticket of
// the same name and another secret, with a MAC off by one bit, naming a
// ticket the endpoint does not hold, and with a MAC over another datagram
// size: each is dropped unanswered and counted, and leaves no session,
// half-open or not; a genuine OPEN sent after them opens its session.
func TestSpoofedOpenDropped(t *testing.T) {
	srv, p, conns := authServer(t, afxdp.Options{Ticket: testTicket})
	forger := protocol.NewKeyring(afxdp.Ticket{ID: testTicket.ID, Secret: [32]byte{'x'}})
	ts := time.Now().UnixNano()
	stranger := afxdp.NewTicket()

	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 1, Window: 64, Offset: 1472}, nil)
	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 2, Window: 64, Offset: 1472}, forger.SealOpen(2, 1472, ts))
	_, flipped := p.authOpen(3, 1472)
	flipped[len(flipped)-1] ^= 1
	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 3, Window: 64, Offset: 1472}, flipped)
	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 4, Window: 64, Offset: 1472}, protocol.NewKeyring(stranger).SealOpen(4, 1472, ts))
	_, other := p.authOpen(5, 9000)
	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 5, Window: 64, Offset: 1472}, other)
	// DATA for the sessions the OPENs asked for: none exists.
	p.send(t, protocol.PacketHeader{Type: protocol.TypeAck, Session: 3, Window: 64}, nil)

	st := testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Received >= 6 }, "spoofed OPENs handled")
	if st.Unauthentic != 5 || st.HalfOpen != 0 || st.Sessions != 0 || st.Replayed != 0 {
		t.Fatalf("after 5 spoofed OPENs: %+v, want 5 unauthentic and no session", st)
	}
	h, auth := p.authOpen(99, 1472)
	p.send(t, h, auth)
	seen := p.answered(t, 99)
	for id := range uint64(6) {
		if seen[id] && id != 3 { // 3 gets a RESET for its ACK, not an answer
			t.Errorf("session %d: a spoofed OPEN was answered", id)
		}
	}
	p.send(t, protocol.PacketHeader{Type: protocol.TypeAck, Session: 99, Window: 64}, nil)
	select {
	case c := <-conns:
		if got := c.RemoteAddr().String(); got != memB.String() {
			t.Fatalf("accepted a session from %s", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the genuine session was not accepted")
	}
	if st := srv.Stats(); st.Sessions != 1 || st.Unauthentic != 5 {
		t.Fatalf("after the genuine OPEN: %+v", st)
	}
}

// TestForgedTokenDropped sends a session's endpoint packets without the
// session's token: DATA, a CLOSE and a RESET. Each is dropped and counted,
// none is delivered or ends the session, and the session's own packets
// keep flowing.
func TestForgedTokenDropped(t *testing.T) {
	srv, p, conns := authServer(t, afxdp.Options{Ticket: testTicket, Window: 64})
	p.open(t, 7)
	var c *afxdp.Conn
	select {
	case c = <-conns:
	case <-time.After(5 * time.Second):
		t.Fatal("no session accepted")
	}
	got := make(frames, 8)
	go c.Receive(got)
	frame := func(meta string) []byte {
		b, err := wire.AppendHead(nil, &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: []byte(meta)})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := p.tok[7] ^ 1<<17
	data := protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast, Session: 7, Window: 64}
	forged := data
	forged.Token = bad
	p.send(t, forged, frame("forged"))
	p.send(t, protocol.PacketHeader{Type: protocol.TypeClose, Session: 7, Token: bad}, nil)
	p.send(t, protocol.PacketHeader{Type: protocol.TypeReset, Session: 7, Token: bad}, nil)
	testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.BadTokens >= 3 }, "forged packets dropped")
	p.send(t, data, frame("genuine"))
	second := data
	second.Seq, second.Msg = 1, 1
	p.send(t, second, frame("second"))
	for _, want := range []string{"genuine", "second"} {
		select {
		case m := <-got:
			if m != want {
				t.Fatalf("delivered %q, want %q", m, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q not delivered", want)
		}
	}
	if st := srv.Stats(); st.BadTokens != 3 || st.Sessions != 1 {
		t.Fatalf("%+v: want 3 packets dropped for their token and the session open", st)
	}
	select {
	case <-c.Done():
		t.Fatalf("the session ended: %v", c.Err())
	default:
	}
}

// TestReplayedOpen replays a genuine OPEN once its session has closed, and
// sends one whose clock is older than protocol.OpenSkew: both are dropped
// and counted as replays, leaving no session.
func TestReplayedOpen(t *testing.T) {
	srv, p, conns := authServer(t, afxdp.Options{Ticket: testTicket})
	h, auth := p.authOpen(11, 1472)
	p.send(t, h, auth)
	p.await(t, 11, "answer to OPEN", func(h protocol.PacketHeader) bool { return h.Flags&protocol.FlagSize != 0 })
	p.send(t, protocol.PacketHeader{Type: protocol.TypeAck, Session: 11, Window: 64}, nil)
	<-conns
	p.send(t, protocol.PacketHeader{Type: protocol.TypeClose, Session: 11}, nil)
	testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Sessions == 0 }, "session closed")

	p.send(t, h, auth) // the same OPEN again
	r := protocol.NewKeyring(*testTicket)
	old := time.Now().Add(-protocol.OpenSkew - time.Second).UnixNano()
	p.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: 12, Window: 64, Offset: 1472}, r.SealOpen(12, 1472, old))
	st := testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Replayed >= 2 }, "replays handled")
	if st.Replayed != 2 || st.Unauthentic != 0 || st.HalfOpen != 0 || st.Sessions != 0 {
		t.Fatalf("after a replayed and a stale OPEN: %+v", st)
	}
}

// TestDialNeedsTicket: an endpoint holding no ticket cannot dial, nor be
// opened under a ticket it does not hold; InsecureNoAuth on both ends
// opens sessions without one.
func TestDialNeedsTicket(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	srv, cli := afxdp.NewEndpoint(la, afxdp.Options{}), afxdp.NewEndpoint(lb, afxdp.Options{Backlog: -1})
	defer srv.Close()
	defer cli.Close()
	if _, err := cli.Dial(context.Background(), memA.String()); !errors.Is(err, afxdp.ErrNoTicket) {
		t.Fatalf("dial without a ticket: %v, want ErrNoTicket", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cli.DialTicket(ctx, memA.String(), testTicket); err == nil {
		t.Fatal("opened a session under a ticket the peer does not hold")
	}
	if st := srv.Stats(); st.Unauthentic == 0 || st.HalfOpen != 0 {
		t.Fatalf("%+v: want the OPENs dropped as unauthentic", st)
	}

	la, lb = link.MemPair(memA, memB, link.MemOptions{})
	isrv, icli := afxdp.NewEndpoint(la, afxdp.Options{InsecureNoAuth: true}), afxdp.NewEndpoint(lb, afxdp.Options{InsecureNoAuth: true, Backlog: -1})
	t.Cleanup(func() { icli.Close() })
	serveEcho(t, isrv)
	e := dialEcho(t, icli, memA.String())
	for i := range 5 {
		if err := e.call(pattern(1000, byte(i)), 10*time.Second); err != nil {
			t.Fatalf("without tickets: %v", err)
		}
	}
}

// TestIssueRevoke opens a session under a ticket the endpoint issued, then
// revokes it: the session goes on, and the ticket opens no other.
func TestIssueRevoke(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	srv, cli := afxdp.NewEndpoint(la, afxdp.Options{}), afxdp.NewEndpoint(lb, afxdp.Options{Backlog: -1})
	defer srv.Close()
	defer cli.Close()
	accepted := acceptAll(t, srv)
	tk := srv.Issue()
	c, err := cli.DialTicket(context.Background(), memA.String(), &tk)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv.Revoke(tk.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := cli.DialTicket(ctx, memA.String(), &tk); err == nil {
		t.Fatal("a revoked ticket opened a session")
	}
	done := make(chan error, 1)
	if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: []byte("after"), Done: doneFunc(func(err error) { done <- err })}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the session opened before the revocation: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the session opened before the revocation stalled")
	}
	if n := testwait.For(t, settle, accepted, func(n int) bool { return n >= 1 }, "the session accepted"); n != 1 {
		t.Fatalf("%d sessions accepted, want 1", n)
	}
}

type doneFunc func(error)

func (f doneFunc) Sent(_ *wire.Message, err error) { f(err) }

// TestDialWrongTicketSaysSo dials under a shared ticket the listener does
// not hold: the OPEN is dropped unanswered, and the dial's error names the
// ticket as the likely cause.
func TestDialWrongTicketSaysSo(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	other := afxdp.NewTicket()
	srv := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	cli := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: &other, Backlog: -1})
	defer srv.Close()
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := cli.Dial(ctx, memA.String())
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "packet ticket") {
		t.Fatalf("dial under a ticket the peer does not hold: %v, want a deadline naming the packet ticket", err)
	}
}
