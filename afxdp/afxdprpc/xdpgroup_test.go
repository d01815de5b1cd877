package afxdprpc_test

import (
	"fmt"
	"testing"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/netpath"
)

// openXDP opens the packet transport on AF_XDP sockets of link ifname under
// the tests' ticket; a link that falls back to another path is an error.
func openXDP(ifname string, port uint16) (*afxdp.Group, error) {
	o, err := afxdp.Open(ifname, port, afxdp.Options{Ticket: testTicket}, link.XSKOptions{})
	if err != nil {
		return nil, err
	}
	if o.Path != netpath.AFXDP {
		o.Group.Close()
		return nil, fmt.Errorf("no AF_XDP on %s: %v", ifname, o.Fallback)
	}
	return o.Group, nil
}

// openXDPIn is openXDP on e's link, in e's namespace, closed when tb ends.
func openXDPIn(tb testing.TB, e *netns.End, port uint16) *afxdp.Group {
	tb.Helper()
	var g *afxdp.Group
	if err := e.Do(func() (err error) {
		g, err = openXDP(e.Link, port)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}
