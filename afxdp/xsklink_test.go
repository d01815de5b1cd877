package afxdp_test

import (
	"errors"
	"testing"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/internal/netns"
)

const xskPort = 7700

// openXSK opens an XSKLink on e's veth end, inside e's namespace.
func openXSK(t testing.TB, e *netns.End, opts afxdp.XSKOptions) *afxdp.XSKLink {
	t.Helper()
	if opts.Port == 0 {
		opts.Port = xskPort
	}
	var l *afxdp.XSKLink
	if err := e.Do(func() (err error) { l, err = afxdp.OpenXSK(e.Link, opts); return err }); err != nil {
		t.Fatal(err)
	}
	return l
}

// xskEndpoints returns a server endpoint in B and a client endpoint in A,
// both over AF_XDP, closed (and checked to leave no XDP program) at the end.
func xskEndpoints(t testing.TB, p *netns.Pair, wrap func(afxdp.Link) afxdp.Link) (srv, cli *afxdp.Endpoint, ls, lc *afxdp.XSKLink) {
	t.Helper()
	ls, lc = openXSK(t, p.B, afxdp.XSKOptions{}), openXSK(t, p.A, afxdp.XSKOptions{})
	var s, c afxdp.Link = ls, lc
	if wrap != nil {
		s, c = wrap(s), wrap(c)
	}
	srv, cli = afxdp.NewEndpoint(s, afxdp.Options{}), afxdp.NewEndpoint(c, afxdp.Options{Backlog: -1})
	t.Cleanup(func() {
		srv.Close()
		cli.Close()
		for _, e := range []*netns.End{p.A, p.B} {
			if on, err := e.XDPAttached(); err != nil || on {
				t.Errorf("%s: XDP program still attached after close (%v)", e.Link, err)
			}
		}
	})
	return srv, cli, ls, lc
}

func TestRPCOverXSK(t *testing.T) {
	p := netns.NewForTest(t, netns.Options{})
	srv, cli, ls, _ := xskEndpoints(t, p, nil)
	checkRPC(t, serveRPC(t, srv, cli), 1000, 64<<20)
	c, err := ls.Program().Counters()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server program %+v, client %+v server %+v", c, cli.Stats(), srv.Stats())
	if c.Redirected == 0 {
		t.Fatal("nothing went through AF_XDP")
	}
}

func TestXSKOpenOnMissingInterface(t *testing.T) {
	p := netns.NewForTest(t, netns.Options{})
	err := p.A.Do(func() error {
		_, err := afxdp.OpenXSK("nosuch0", afxdp.XSKOptions{Port: xskPort})
		return err
	})
	if err == nil || !errors.Is(err, afxdp.ErrUnavailable) {
		t.Fatalf("open on a missing interface: %v", err)
	}
	if err := p.A.Do(func() error { return afxdp.Available(p.A.Link) }); err != nil {
		t.Fatalf("Available on a usable veth: %v", err)
	}
}
