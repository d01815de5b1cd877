package netns

import (
	"fmt"

	"github.com/vishvananda/netlink"
)

// Do runs f in e's namespace; see the package function Do.
func (e *End) Do(f func() error) error {
	return do(e.handle, e.NS, f)
}

// Go runs f for good in e's namespace; see the package function Go.
func (e *End) Go(f func()) error {
	return goIn(e.handle, e.NS, f)
}

// XDPAttached reports whether an XDP program is attached to the veth end,
// as the kernel reports it in the link's attributes.
func (e *End) XDPAttached() (bool, error) {
	h, err := netlink.NewHandleAt(e.handle)
	if err != nil {
		return false, fmt.Errorf("netns: netlink in %s: %w", e.NS, err)
	}
	defer h.Close()
	l, err := h.LinkByIndex(e.Ifindex)
	if err != nil {
		return false, fmt.Errorf("netns: link %s: %w", e.Link, err)
	}
	x := l.Attrs().Xdp
	return x != nil && x.Attached, nil
}
