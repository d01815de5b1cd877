package afxdp_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/xdp"
)

func TestReactors(t *testing.T) {
	tests := []struct {
		want, queues int
		reactors     int
	}{
		{0, 4, 1},
		{2, 4, 2},
		{8, 2, 2},
		{1, 0, 1},
		{-1, 4, 1},
	}
	for _, tt := range tests {
		if got := afxdp.Reactors(tt.want, tt.queues); got != tt.reactors {
			t.Errorf("Reactors(%d, %d queues) = %d, want %d", tt.want, tt.queues, got, tt.reactors)
		}
	}
}

// openGroup opens a reactor per queue on e's veth end.
func openGroup(t testing.TB, e *netns.End, mode xdp.Mode, opts afxdp.Options) (*afxdp.Group, []*link.XSKLink) {
	t.Helper()
	var xl []*link.XSKLink
	if err := e.Do(func() (err error) {
		xl, err = link.OpenXSKLinks(e.Link, link.XSKOptions{Port: xskPort, XDPMode: mode}, 8)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	links := make([]link.Link, len(xl))
	for i, l := range xl {
		links[i] = l
	}
	g := afxdp.NewGroup(links, opts)
	t.Cleanup(func() {
		g.Close()
		// The links shared one program; the last to close detached it.
		if on, err := e.XDPAttached(); err != nil || on {
			t.Errorf("%s: XDP program still attached after close (%v)", e.Link, err)
		}
		for _, l := range xl {
			if n := l.LostFrames(); n != 0 {
				t.Errorf("%s: %d UMEM frames unaccounted for after close", e.Link, n)
			}
		}
	})
	return g, xl
}

// TestGroupOverQueues runs a reactor per queue on both ends of a 2-queue
// veth. In native mode each packet arrives on the queue its sender used; in
// generic mode all arrive on queue 0, and the reactor of queue 0 forwards
// other reactors' packets to them.
func TestGroupOverQueues(t *testing.T) {
	for _, mode := range []xdp.Mode{xdp.ModeNative, xdp.ModeGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			p := netnstest.NewForTest(t, netns.Options{Queues: 2})
			srv, sl := openGroup(t, p.B, mode, afxdp.Options{Ticket: testTicket})
			cli, _ := openGroup(t, p.A, mode, afxdp.Options{Ticket: testTicket, Backlog: -1})
			if len(sl) != 2 || len(srv.Endpoints()) != 2 {
				t.Fatalf("%d links, %d endpoints, want 2", len(sl), len(srv.Endpoints()))
			}
			serveEcho(t, srv)
			for i := range 8 {
				e := dialEcho(t, cli, srv.Addr().String())
				for j := range 50 {
					if err := e.call(fmt.Appendf(nil, "%d/%d", i, j), 10*time.Second); err != nil {
						t.Fatalf("client %d: %v", i, err)
					}
				}
			}
			// The client dials from both reactors in turn; in generic mode
			// the answers to reactor 1's sessions arrive at reactor 0.
			st := cli.Stats()
			t.Logf("server links received %v and %v; client forwarded %d", sl[0].Received(), sl[1].Received(), st.Forwarded)
			switch mode {
			case xdp.ModeNative:
				if sl[0].Received()[0] == 0 || sl[1].Received()[0] == 0 {
					t.Fatal("a reactor's queue received nothing")
				}
			case xdp.ModeGeneric:
				if st.Forwarded == 0 {
					t.Fatal("nothing was forwarded between reactors")
				}
			}
		})
	}
}
