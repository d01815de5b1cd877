package link_test

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/linktest"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
)

// The tests' AF_XDP links, on the port linktest steers.
var openXSK = linktest.OpenXSK

const xskPort = linktest.XSKPort

// TestXSKAvailable checks the fallback decision: a usable veth is fine; a
// missing or down interface is refused with ErrUnavailable, as is OpenXSK on
// it, and nothing stays attached.
func TestXSKAvailable(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{})
	if err := p.A.Do(func() error { return link.Available(p.A.Link) }); err != nil {
		t.Fatalf("Available on a usable veth: %v", err)
	}
	err := p.A.Do(func() error {
		_, err := link.OpenXSK("nosuch0", link.XSKOptions{Port: xskPort})
		return err
	})
	if !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("open on a missing interface: %v", err)
	}
	if err := p.A.Do(func() error { return link.Available("nosuch0") }); !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("Available on a missing interface: %v", err)
	}
	err = p.A.Do(func() error {
		l, err := netlink.LinkByName(p.A.Link)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetDown(l); err != nil {
			return err
		}
		defer netlink.LinkSetUp(l)
		return link.Available(p.A.Link)
	})
	if !errors.Is(err, link.ErrUnavailable) {
		t.Fatalf("Available on a down interface: %v", err)
	}
	if on, err := p.A.XDPAttached(); err != nil || on {
		t.Fatalf("XDP attached after the checks: %v %v", on, err)
	}
}

// TestXSKVethWithoutQueueCount: a veth made as `ip link add` makes it,
// without a queue count, allocates a queue per CPU but the kernel uses one,
// and binding a socket past it fails (EINVAL): OpenXSK binds the queues in
// use only.
func TestXSKVethWithoutQueueCount(t *testing.T) {
	p := netnstest.NewForTest(t, netns.Options{}) // its namespaces hold the veth made here
	for _, args := range [][]string{
		{"link", "add", "va", "type", "veth", "peer", "name", "vb"},
		{"addr", "add", "198.19.255.1/32", "dev", "va"},
		{"link", "set", "vb", "up"},
		{"link", "set", "va", "up"},
	} {
		if out, err := exec.Command("ip", append([]string{"-n", p.B.NS}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	va := *p.B
	va.Link = "va"
	ls := openXSK(t, &va, link.XSKOptions{})
	t.Cleanup(func() { ls.Close() })
	if q := ls.Queues(); len(q) != 1 || q[0] != 0 {
		t.Fatalf("sockets on queues %v, want [0]", q)
	}
}
