package afxdp_test

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/rpc"
)

func listenUDP(t testing.TB, addr string) *link.UDPLink {
	t.Helper()
	l, err := link.ListenUDP(addr, link.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRPCOverUDPNamespacesClean(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netns.NewForTest(t, netns.Options{})
	ls, lc := udpPair(t, p)
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
}

func TestRPCOverUDPLoopback(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	srv := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket})
	cli := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	checkRPC(t, serveRPC(t, srv, cli), 1000, 16<<20)
}

// TestRPCOverUDPNamespaces runs calls between two namespaces over a veth
// whose kernel path loses, reorders and duplicates packets (netem).
func TestRPCOverUDPNamespaces(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	netns.Require(t, netns.Netem)
	p := netns.NewForTest(t, netns.Options{})
	for _, e := range []*netns.End{p.A, p.B} {
		if err := e.Netem("loss", "5%", "delay", "1ms", "reorder", "25%", "duplicate", "1%"); err != nil {
			t.Fatal(err)
		}
	}
	ls, lc := udpPair(t, p)
	srv, cli := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(lc, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	size := 64 << 20
	if testing.Short() || raceEnabled { // see raceEnabled
		size = 4 << 20
	}
	checkRPC(t, serveRPC(t, srv, cli), 1000, size)
	t.Logf("client %+v server %+v", cli.Stats(), srv.Stats())
}

// udpPair returns UDP links in the two namespaces of p, the server's on
// port 7600.
func udpPair(t testing.TB, p *netns.Pair) (srv, cli *link.UDPLink) {
	t.Helper()
	if err := p.B.Do(func() (err error) {
		srv, err = link.ListenUDP(p.B.Addr.String()+":7600", link.UDPOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := p.A.Do(func() (err error) { cli, err = link.ListenUDP(p.A.Addr.String()+":0", link.UDPOptions{}); return err }); err != nil {
		t.Fatal(err)
	}
	return srv, cli
}

// TestRPCOverUDPImpaired is the namespace test with faults injected on both
// receive sides, for kernels without netem.
func TestRPCOverUDPImpaired(t *testing.T) {
	t.Parallel() // its own link or namespaces; waits on its calls more than it computes
	p := netns.NewForTest(t, netns.Options{})
	ls, lc := udpPair(t, p)
	imp := Impairment{Loss: 0.05, Reorder: 0.25, Duplicate: 0.01, Seed: 3}
	is, ic := Impair(ls, imp), Impair(lc, imp)
	srv, cli := afxdp.NewEndpoint(is, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(ic, afxdp.Options{Ticket: testTicket, Backlog: -1})
	t.Cleanup(func() { srv.Close(); cli.Close() })
	size := 64 << 20
	if testing.Short() || raceEnabled { // see raceEnabled
		size = 4 << 20
	}
	checkRPC(t, serveRPC(t, srv, cli), 1000, size)
	srv.Close()
	cli.Close()
	if is.Dropped == 0 || is.Reordered == 0 || is.Duplicated == 0 {
		t.Fatalf("nothing impaired: %+v", is)
	}
}

// TestServerRestart closes the server endpoint and starts a new one on the
// same port: the client's session is reset or times out, and the rpc
// client redials and carries on.
func TestServerRestart(t *testing.T) {
	ls := listenUDP(t, "127.0.0.1:0")
	addr := ls.LocalAddr().String()
	srv := afxdp.NewEndpoint(ls, afxdp.Options{Ticket: testTicket})
	cli := afxdp.NewEndpoint(listenUDP(t, "127.0.0.1:0"), afxdp.Options{Ticket: testTicket, Backlog: -1, DeadAfter: time.Second})
	t.Cleanup(func() { cli.Close() })
	c := serveRPC(t, srv, cli)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r rpc.Reply
	if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte("before")}, &r); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv2 := afxdp.NewEndpoint(listenUDP(t, addr), afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { srv2.Close() })
	s := rpc.NewServer()
	s.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Transport(srv2).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	// The first call may fail with the old session; the next redials.
	var last error
	for range 50 {
		if last = c.Call(ctx, methodEcho, &rpc.Request{Meta: []byte("after")}, &r); last == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // paces the redials while the restarted server's session opens
	}
	if last != nil || string(r.Meta) != "after" {
		t.Fatalf("after the restart: %v, %q", last, r.Meta)
	}
	r.Release()
}
