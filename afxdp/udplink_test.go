package afxdp_test

import (
	"testing"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
)

func listenUDP(t testing.TB, addr string) *link.UDPLink {
	t.Helper()
	l, err := link.ListenUDP(addr, link.UDPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
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
