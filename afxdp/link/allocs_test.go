package link_test

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
)

// TestLinkAllocs checks the Link contract that moving a datagram allocates
// nothing, on the two links TestSteadyStateAllocs does not run: a datagram
// goes from an XSKLink to a UDPLink and back, through TxBuffer, Queue,
// Flush and Receive on both.
func TestLinkAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := netnstest.NewForTest(t, netns.Options{})
	x := openXSK(t, p.A, link.XSKOptions{})
	t.Cleanup(func() { x.Close() })
	var u *link.UDPLink
	if err := p.B.Do(func() (err error) {
		u, err = link.ListenUDP(p.B.Addr.String()+":7611", link.UDPOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := x.Resolve(ctx, u.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	pkts := make([]link.Datagram, 8)
	send := func(from link.Link, to link.Link, n int) {
		buf := from.TxBuffer()
		if buf == nil {
			t.Fatal("no transmit buffer")
		}
		buf[0] = byte(n)
		from.Queue(64, to.LocalAddr())
		if err := from.Flush(); err != nil {
			t.Fatal(err)
		}
		// Bounded in time: the kernel delivers over veth within the
		// sending call, but a loaded machine may defer it to ksoftirqd.
		// A loop of its own, not testwait's: this runs inside
		// AllocsPerRun, and a closure and its message would allocate.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			k, err := to.Receive(pkts)
			if err != nil {
				t.Fatal(err)
			}
			if k > 0 {
				if len(pkts[0].Data) != 64 || pkts[0].Data[0] != byte(n) {
					t.Fatalf("got %d bytes starting %d, want 64 starting %d", len(pkts[0].Data), pkts[0].Data[0], byte(n))
				}
				return
			}
		}
		t.Fatal("datagram lost")
	}
	n := 0
	roundTrip := func() {
		n++
		send(x, u, n)
		send(u, x, n)
	}
	for range 100 {
		roundTrip() // learn the peer, grow the lent list, warm the rings
	}
	if allocs := testing.AllocsPerRun(500, roundTrip); allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}
