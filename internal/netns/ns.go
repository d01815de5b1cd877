package netns

import (
	"errors"
	"fmt"
	"runtime"

	vnetns "github.com/vishvananda/netns"
)

// Do runs f on a fresh goroutine whose OS thread has entered the namespace
// h, and returns f's error. Sockets f creates belong to the namespace and
// keep working from any goroutine afterwards; interface indexes and names
// f uses are resolved in the namespace, and a process f starts is born in
// it. Goroutines f starts do not inherit the namespace. After f the thread
// returns to its original namespace; if that fails, the goroutine ends
// with the thread still locked, so the runtime destroys the thread rather
// than run other goroutines in the wrong namespace.
func Do(h vnetns.NsHandle, f func() error) error { return do(h, "namespace", f) }

// do is Do, naming the namespace name in its own errors; f's error comes
// back as it is.
func do(h vnetns.NsHandle, name string, f func() error) error {
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
		if err := vnetns.Set(h); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: enter %s: %w", name, err)
			return
		}
		ferr := f()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("netns: leave %s: %w", name, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Go starts f on a new goroutine that locks its OS thread and enters the
// namespace h for good: the thread never returns to the original
// namespace, and because the goroutine never unlocks it, the runtime
// destroys the thread when f returns. Use it for long-lived loops that
// must keep resolving names in the namespace. Go returns once the
// goroutine is in the namespace, or the error that kept it out (f is then
// not run).
func Go(h vnetns.NsHandle, f func()) error { return goIn(h, "namespace", f) }

func goIn(h vnetns.NsHandle, name string, f func()) error {
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, on purpose
		if err := vnetns.Set(h); err != nil {
			ready <- fmt.Errorf("netns: enter %s: %w", name, err)
			return
		}
		ready <- nil
		f()
	}()
	return <-ready
}

// NewNamed creates a network namespace bound at /run/netns/name (visible
// to "ip netns") and returns a handle to it; the caller's thread stays
// where it is. Only DeleteNamed (or "ip netns delete") removes it.
func NewNamed(name string) (vnetns.NsHandle, error) {
	return create(func() (vnetns.NsHandle, error) { return vnetns.NewNamed(name) })
}

// NewAnonymous creates a network namespace held only by the returned
// handle and whatever is later opened in it (sockets, processes): it
// vanishes with the last of those, even if the process dies.
func NewAnonymous() (vnetns.NsHandle, error) {
	return create(vnetns.New)
}

// DeleteNamed removes the namespace bound at /run/netns/name. The kernel
// destroys it, with its interfaces (and so both ends of their veth pairs),
// once no process or socket is left in it.
func DeleteNamed(name string) error {
	if err := vnetns.DeleteNamed(name); err != nil {
		return fmt.Errorf("netns: delete %s: %w", name, err)
	}
	return nil
}

// OpenNamed returns a handle to the namespace bound at /run/netns/name.
func OpenNamed(name string) (vnetns.NsHandle, error) {
	h, err := vnetns.GetFromName(name)
	if err != nil {
		return -1, fmt.Errorf("netns: open %s: %w", name, err)
	}
	return h, nil
}

// create runs mk, which creates a namespace and moves the calling thread
// into it, on a locked thread it then returns to the original namespace.
// When mk fails the thread never left (unshare changes nothing on error),
// so the one error is the cause, EPERM without CAP_SYS_ADMIN.
func create(mk func() (vnetns.NsHandle, error)) (vnetns.NsHandle, error) {
	type result struct {
		h   vnetns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{-1, fmt.Errorf("netns: current namespace: %w", err)}
			return
		}
		defer orig.Close()
		h, err := mk()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{-1, err}
			return
		}
		if err := vnetns.Set(orig); err != nil {
			h.Close()
			c <- result{-1, fmt.Errorf("netns: restore namespace: %w", err)} // the thread dies locked
			return
		}
		runtime.UnlockOSThread()
		c <- result{h, nil}
	}()
	r := <-c
	return r.h, r.err
}
