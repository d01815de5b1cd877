package link_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/vishvananda/netlink"
)

// TestResolveRacesClose closes a link while resolutions of an address no
// host answers are in progress on other goroutines. They must end with
// ErrLinkClosed, promptly, and Close must not close the netlink handle and
// the probe socket under them (the race detector reports that).
func TestResolveRacesClose(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	l := openXSK(t, p.A, link.XSKOptions{})
	nobody := netip.AddrPortFrom(p.A.Prefix.Addr().Next().Next().Next().Next(), 9)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 4)
	for range cap(errc) {
		go func() { errc <- l.Resolve(ctx, nobody) }()
	}
	// Close once a probe is out: the kernel holds an entry for nobody.
	// (Any interleaving must pass; this one is the likeliest to race.)
	testwait.Eventually(t, 10*time.Second, func() bool { return hasNeighbour(t, p.A, nobody.Addr()) },
		"a neighbour entry for the address being resolved")
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for range cap(errc) {
		if err := <-errc; !errors.Is(err, link.ErrLinkClosed) {
			t.Errorf("Resolve after Close: %v, want ErrLinkClosed", err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("resolutions took %v to end after Close", d)
	}
}

// hasNeighbour reports whether the kernel's neighbour table in e's
// namespace holds an entry, of any state, for ip.
func hasNeighbour(t *testing.T, e *netns.End, ip netip.Addr) bool {
	found := false
	err := e.Do(func() error {
		ns, err := netlink.NeighList(e.Ifindex, netlink.FAMILY_V4)
		for _, n := range ns {
			if a, ok := netip.AddrFromSlice(n.IP.To4()); ok && a == ip {
				found = true
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
