package afxdprpc_test

import (
	"testing"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/netpath"
)

// TestOpenChoosesPath opens the transport on a veth (AF_XDP) and on
// loopback (no Ethernet address: kernel UDP), and makes calls between the
// two paths.
func TestOpenChoosesPath(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	open := func(e *netns.End, ifname string, opts afxdp.Options) (*afxdp.Group, netpath.Path, error) {
		var o afxdp.Opened
		err := e.Do(func() (err error) {
			o, err = afxdp.Open(ifname, 7900, opts, link.XSKOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { o.Group.Close() })
		return o.Group, o.Path, o.Fallback
	}
	srv, path, fallback := open(p.B, p.B.Link, afxdp.Options{Ticket: testTicket})
	if path != netpath.AFXDP || fallback != nil {
		t.Fatalf("veth: path %s, fallback %v", path, fallback)
	}
	_, path, fallback = open(p.A, "lo", afxdp.Options{Ticket: testTicket, Backlog: -1})
	if path != netpath.UDP || fallback == nil {
		t.Fatalf("loopback: path %s, fallback %v", path, fallback)
	}
	// An AF_XDP client in A calls the AF_XDP server in B.
	cli, path, _ := open(p.A, p.A.Link, afxdp.Options{Ticket: testTicket, Backlog: -1})
	if path != netpath.AFXDP {
		t.Fatalf("client veth: path %s", path)
	}
	checkRPC(t, serveRPC(t, srv, cli), 100, 1<<20)
}
