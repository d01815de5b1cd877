package netns

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Do runs f on a fresh goroutine whose OS thread has entered e's namespace,
// and returns f's error. Sockets f creates belong to the namespace and keep
// working from any goroutine afterwards; interface indexes and names f uses
// are resolved in the namespace. Goroutines f starts do not inherit the
// namespace. After f the thread returns to its original namespace; if that
// fails the thread is discarded.
func (e *End) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: current namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := vnetns.Set(e.handle); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter %s: %w", e.NS, err)
			return
		}
		ferr := f()
		if err := vnetns.Set(orig); err != nil {
			// Stay locked: the thread exits with this goroutine.
			errc <- fmt.Errorf("netns: leave %s: %w (after %v)", e.NS, err, ferr)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Go starts f on a new goroutine that locks its OS thread and enters e's
// namespace for good: the thread never returns to the original namespace,
// and because the goroutine never unlocks it, the runtime destroys the
// thread when f returns. Use it for long-lived loops (reactors, servers)
// that must keep resolving names in the namespace. Go returns once the
// goroutine is in the namespace, or the error that kept it out (f is then
// not run).
func (e *End) Go(f func()) error {
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, on purpose
		if err := vnetns.Set(e.handle); err != nil {
			ready <- fmt.Errorf("netns: enter %s: %w", e.NS, err)
			return
		}
		ready <- nil
		f()
	}()
	return <-ready
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
