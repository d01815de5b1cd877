package afxdp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// settle is how long the tests give a state that an endpoint's goroutines
// bring about (packets handled, sessions expired) before failing: a bound
// against hanging, not a measure, far past what an idle machine needs
// (milliseconds) because the race detector on a loaded 2-core machine
// took over 5s.
const settle = 30 * time.Second

// acceptAll serves ep as rpc.Server does: a goroutine per accepted Conn
// running its Receive loop. It returns how many Conns it accepted so far.
// A session is handed to Accept before its first packet is handled, but
// the goroutine that accepts it may run later: wait for the count.
func acceptAll(t *testing.T, ep *afxdp.Endpoint) func() int {
	var mu sync.Mutex
	n := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ep.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			n++
			mu.Unlock()
			wg.Add(1)
			go receiveAll(&wg, c)
		}
	}()
	t.Cleanup(func() { ep.Close(); wg.Wait() })
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// receiveAll is the goroutine acceptAll runs for each Conn: named, so
// that the flood's goroutine checks can tell it from the endpoint's own.
func receiveAll(wg *sync.WaitGroup, c *afxdp.Conn) {
	defer wg.Done()
	c.Receive(discard{})
}

// receivers ignores acceptAll's goroutines, one per accepted session.
var receivers = goleak.IgnoreAnyFunction("github.com/starwire/starwire/afxdp_test.receiveAll")

// flooder sends protocol packets from one UDP socket, as a peer that
// opens sessions and never uses them would. It holds testTicket: it is a
// peer allowed to open sessions, whom the bounds must stop.
type flooder struct {
	conn *net.UDPConn
	to   netip.AddrPort
	buf  [protocol.HeaderLen + protocol.OpenAuthLen]byte
	tok  map[uint64]uint64
}

func newFlooder(t *testing.T, from string, to netip.AddrPort) *flooder {
	t.Helper()
	f, err := listenFlooder(t, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// listenFlooder is newFlooder for a namespace's Do, which runs on a
// goroutine of its own.
func listenFlooder(t *testing.T, from string, to netip.AddrPort) (*flooder, error) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(from)))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return &flooder{conn: c, to: to}, nil
}

// send sends h; an OPEN opens under testTicket, other packets carry the
// token of their session.
func (f *flooder) send(t *testing.T, h protocol.PacketHeader) {
	t.Helper()
	if f.tok == nil {
		f.tok = make(map[uint64]uint64)
	}
	if h.Type == protocol.TypeOpen {
		r := protocol.NewKeyring(*testTicket)
		ts := time.Now().UnixNano()
		h.Token, _ = r.Tokens(h.Session, ts)
		f.tok[h.Session] = h.Token
		h.Length = uint16(copy(f.buf[protocol.HeaderLen:], r.SealOpen(h.Session, h.Offset, ts)))
	} else {
		h.Token = f.tok[h.Session]
	}
	protocol.PutHeader(f.buf[:], &h)
	if _, err := f.conn.WriteToUDPAddrPort(f.buf[:protocol.HeaderLen+int(h.Length)], f.to); err != nil {
		t.Fatal(err)
	}
}

// open sends n OPENs for sessions first..first+n-1 and, with complete,
// the packet that completes each handshake. It sends them in bursts of 50
// sessions, each after srv received the last, so that none is lost on the
// way (an AF_XDP socket's ring holds 2048).
func (f *flooder) open(t *testing.T, srv *afxdp.Endpoint, first uint64, n int, complete bool) {
	t.Helper()
	const burst = 50
	for i := uint64(0); i < uint64(n); {
		want := srv.Stats().Received
		for end := min(i+burst, uint64(n)); i < end; i++ {
			f.send(t, protocol.PacketHeader{Type: protocol.TypeOpen, Session: first + i, Window: 64, Offset: 1472})
			want++
			if complete {
				f.send(t, protocol.PacketHeader{Type: protocol.TypeAck, Session: first + i, Window: 64})
				want++
			}
		}
		testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Received >= want }, "a burst of the flood received")
	}
}

// floodOptions are the bounds the flood tests use.
var floodOptions = afxdp.Options{Ticket: testTicket, MaxSessions: 96, MaxPeerSessions: 64,
	HandshakeTimeout: 300 * time.Millisecond, IdleTimeout: 600 * time.Millisecond, Backlog: 1024}

// checkFlood floods srv with 2,000 OPENs from f's socket, then with 2,000
// completed handshakes, while cli, a well-behaved peer, dials it, and
// checks the session bounds, the expiry of half-open and idle sessions,
// and that goroutines stay bounded.
func checkFlood(t *testing.T, srv *afxdp.Endpoint, f *flooder, cli *afxdp.Endpoint) {
	o := floodOptions
	accepted := acceptAll(t, srv)
	before := goleak.IgnoreCurrent()

	// Half-open: never completed, so never accepted: no goroutine.
	f.open(t, srv, 1, 2000, false)
	st := testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool {
		return s.HalfOpen+s.Refused+s.Expired >= 2000
	}, "OPENs handled")
	if st.HalfOpen > uint64(o.MaxPeerSessions) || st.Sessions != 0 {
		t.Fatalf("after 2000 OPENs from one socket: %d half-open, %d sessions, want at most %d and 0", st.HalfOpen, st.Sessions, o.MaxPeerSessions)
	}
	// The endpoint starts no goroutine for a session, half-open or not.
	testwait.VerifyNone(t, before)
	// A well-behaved peer gets a session meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := cli.Dial(ctx, srv.Addr().String())
	if err != nil {
		t.Fatalf("a well-behaved peer could not dial during the flood: %v", err)
	}
	done := make(doneChan, 1)
	if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Done: done}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("a well-behaved peer's message during the flood: %v", err)
	}
	c.Close()
	st = testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.HalfOpen == 0 }, "half-open sessions expire")
	// The half-open sessions may all have expired while the flood was
	// still being sent, so the wait above need not give the accepting
	// goroutine time to run.
	if n := testwait.For(t, settle, accepted, func(n int) bool { return n >= 1 }, "the well-behaved session accepted"); st.Expired == 0 || st.Expired+st.Refused < 2000 || n != 1 {
		t.Fatalf("%d expired, %d refused, %d accepted; want some expired, the 2000 OPENs (and the well-behaved peer's repeats) in all, and 1 accepted", st.Expired, st.Refused, n)
	}

	// Completed: sessions up to the bound, each a goroutine here, and
	// they close once the flooder stops answering.
	f.open(t, srv, 1_000_000, 2000, true)
	st = testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool {
		return s.Refused+s.Sessions+s.Idle >= st.Refused+2000
	}, "handshakes handled")
	if st.Sessions > uint64(o.MaxPeerSessions) {
		t.Fatalf("%d sessions from one socket, bound %d", st.Sessions, o.MaxPeerSessions)
	}
	// A session that idled out while the flood was still being sent (a
	// loaded machine stretches the flood past IdleTimeout) frees its place
	// for another: the bound is on sessions at once, plus those closed.
	n := accepted()
	idled := int(srv.Stats().Idle)
	if n > 1+o.MaxPeerSessions+idled {
		t.Fatalf("%d sessions accepted from one socket and the well-behaved peer, bound %d (%d idled out)", n, 1+o.MaxPeerSessions+idled, idled)
	}
	testwait.VerifyNone(t, before, receivers)
	st = testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.Sessions == 0 }, "idle sessions close")
	if st.Idle == 0 {
		t.Fatalf("sessions gone without idling out: %+v", st)
	}
	// Every session's goroutine ends with it (VerifyNone waits: they end
	// after the counters say the sessions closed).
	testwait.VerifyNone(t, before)
	t.Logf("%+v", st)
}

// TestOpenFloodUDP floods an endpoint on a kernel UDP socket on loopback.
func TestOpenFloodUDP(t *testing.T) {
	srv := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), floodOptions)
	cli := afxdp.NewEndpoint(listenUDP(t, "127.0.0.3:0"), afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { cli.Close() })
	checkFlood(t, srv, newFlooder(t, "127.0.0.2:0", srv.Addr()), cli)
}

// TestOpenFloodXSK floods an AF_XDP endpoint from a kernel UDP socket in
// the peer namespace; the well-behaved client dials from the same address,
// one session more than the flood may have.
func TestOpenFloodXSK(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	srv := afxdp.NewEndpoint(openXSK(t, p.B, link.XSKOptions{}), floodOptions)
	var f *flooder
	var lc *link.UDPLink
	if err := p.A.Do(func() (err error) {
		if f, err = listenFlooder(t, p.A.Addr.String()+":0", srv.Addr()); err != nil {
			return err
		}
		lc, err = link.ListenUDP(p.A.Addr.String()+":0", link.UDPOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cli := afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { cli.Close() })
	checkFlood(t, srv, f, cli)
}

// TestSessionBoundInTotal: OPENs from several addresses stop at
// MaxSessions.
func TestSessionBoundInTotal(t *testing.T) {
	o := afxdp.Options{Ticket: testTicket, MaxSessions: 10, MaxPeerSessions: 8, HandshakeTimeout: time.Minute}
	srv := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), o)
	t.Cleanup(func() { srv.Close() })
	for i := range 3 {
		newFlooder(t, fmt.Sprintf("127.0.0.%d:0", 4+i), srv.Addr()).open(t, srv, uint64(100*i), 8, false)
	}
	st := testwait.For(t, settle, srv.Stats, func(s afxdp.Stats) bool { return s.HalfOpen+s.Refused >= 24 }, "OPENs handled")
	if st.HalfOpen != 10 || st.Refused != 14 {
		t.Fatalf("%d half-open, %d refused; want 10 and 14", st.HalfOpen, st.Refused)
	}
}

// TestIdlePeerCloses: a session whose peer vanished, with nothing in
// flight, closes after IdleTimeout; one whose peer is there stays open
// however long it is quiet, since the peer answers the probes. On fake
// time: the keepalive's timers are the subject, and a live peer's
// answers can never be late (in real time, a loaded machine under the
// race detector made them come after 300 ms, and the test waited 6 s).
func TestIdlePeerCloses(t *testing.T) {
	const idle = 300 * time.Millisecond
	opts := fakeOptions(afxdp.Options{IdleTimeout: idle})
	t.Run("peer there", func(t *testing.T) {
		fakeTime(t, func(t *testing.T) {
			la, lb := link.MemPair(memA, memB, link.MemOptions{})
			ea, eb, ca, cb := connected(t, la, lb, opts)
			go cb.Receive(discard{})
			sent := ea.Stats().Sent + eb.Stats().Sent
			select {
			case <-ca.Done():
				t.Fatalf("a quiet session with a live peer closed: %v", ca.Err())
			case <-time.After(20 * idle):
			}
			a, b := ea.Stats(), eb.Stats()
			if a.Idle+b.Idle != 0 || a.Sessions != 1 || b.Sessions != 1 {
				t.Fatalf("stats %+v %+v", a, b)
			}
			// Kept open by probes and their answers, not by nothing.
			if a.Sent+b.Sent == sent {
				t.Fatalf("nothing sent in %v of quiet: %+v %+v", 20*idle, a, b)
			}
		})
	})
	t.Run("peer gone", func(t *testing.T) {
		fakeTime(t, func(t *testing.T) {
			la, lb := link.MemPair(memA, memB, link.MemOptions{})
			ea, eb, ca, cb := connected(t, la, lb, opts)
			go cb.Receive(discard{})
			lb.Close() // the peer vanishes without a word
			start := time.Now()
			select {
			case <-ca.Done():
			case <-time.After(10 * idle):
				t.Fatal("the session outlived its silent peer")
			}
			if d := time.Since(start); d < idle || d > idle+idle/2 {
				t.Fatalf("closed after %v of fake time, IdleTimeout %v", d, idle)
			}
			if !errors.Is(ca.Err(), afxdp.ErrPeerUnreachable) {
				t.Fatalf("ended with %v", ca.Err())
			}
			if st := ea.Stats(); st.Idle != 1 || st.Sessions != 0 {
				t.Fatalf("stats %+v", st)
			}
			eb.Close()
		})
	})
}
