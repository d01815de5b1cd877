package afxdp_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/internal/netns"
)

// TestResolveRacesClose closes a link while resolutions of an address no
// host answers are in progress on other goroutines. They must end with
// ErrLinkClosed, promptly, and Close must not close the netlink handle and
// the probe socket under them (the race detector reports that).
func TestResolveRacesClose(t *testing.T) {
	p := netns.NewForTest(t, netns.Options{})
	l := openXSK(t, p.A, afxdp.XSKOptions{})
	nobody := netip.AddrPortFrom(p.A.Prefix.Addr().Next().Next().Next().Next(), 9)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 4)
	for range cap(errc) {
		go func() { errc <- l.Resolve(ctx, nobody) }()
	}
	time.Sleep(30 * time.Millisecond) // let them read the neighbour table and probe
	start := time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for range cap(errc) {
		if err := <-errc; !errors.Is(err, afxdp.ErrLinkClosed) {
			t.Errorf("Resolve after Close: %v, want ErrLinkClosed", err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("resolutions took %v to end after Close", d)
	}
}
