package vethnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// An End is one side of a veth pair, inside its task's namespace.
type End struct {
	Task string     // the task whose namespace holds it
	Name string     // interface name, unique within the namespace
	Addr netip.Addr // its IPv4 address (a /30 shared with the other end)
}

// A Link joins a worker to a parameter server.
type Link struct {
	Worker, PS End
}

// A Fabric is the namespaces and links of a cluster. Close it to let the
// namespaces go.
type Fabric struct {
	ns    map[string]vnetns.NsHandle
	Links []Link
}

// linkUpTimeout bounds the wait for the kernel to report a new veth end up.
const linkUpTimeout = 10 * time.Second

// Build creates a namespace for each task named in ps and workers and a
// veth pair between every worker and every parameter server, with
// addresses in 198.18.0.0/15, one queue per end (so one AF_XDP socket sees
// all of an end's traffic). It needs CAP_NET_ADMIN.
func Build(ps, workers []string) (_ *Fabric, err error) {
	if len(ps)*len(workers) > 1<<15 {
		return nil, fmt.Errorf("vethnet: %d links is more than the address block holds", len(ps)*len(workers))
	}
	f := &Fabric{ns: make(map[string]vnetns.NsHandle)}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	for _, task := range append(append([]string(nil), ps...), workers...) {
		h, err := netns.NewAnonymous()
		if err != nil {
			return nil, fmt.Errorf("vethnet: namespace for %s: %w", task, err)
		}
		f.ns[task] = h
		if err := f.loopbackUp(task); err != nil {
			return nil, err
		}
	}
	for r, w := range workers {
		for p, s := range ps {
			k := r*len(ps) + p
			// Link k gets 198.18.0.0/15's k-th /30: .1 for the server, .2
			// for the worker.
			base := [4]byte{198, 18 + byte(k>>14), byte(k >> 6), byte(k<<2) & 0xfc}
			l := Link{
				PS:     End{Task: s, Name: fmt.Sprintf("swr%d", r), Addr: netip.AddrFrom4([4]byte{base[0], base[1], base[2], base[3] + 1})},
				Worker: End{Task: w, Name: fmt.Sprintf("swp%d", p), Addr: netip.AddrFrom4([4]byte{base[0], base[1], base[2], base[3] + 2})},
			}
			if err := f.addLink(l); err != nil {
				return nil, err
			}
			f.Links = append(f.Links, l)
		}
	}
	for _, l := range f.Links {
		for _, e := range []End{l.PS, l.Worker} {
			if err := f.waitUp(e); err != nil {
				return nil, err
			}
		}
	}
	return f, nil
}

func (f *Fabric) handle(task string) (*netlink.Handle, error) {
	ns, ok := f.ns[task]
	if !ok {
		return nil, fmt.Errorf("vethnet: no namespace for %s", task)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("vethnet: netlink in %s's namespace: %w", task, err)
	}
	return h, nil
}

func (f *Fabric) loopbackUp(task string) error {
	h, err := f.handle(task)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("vethnet: loopback of %s: %w", task, err)
	}
	return nil
}

// addLink creates l's veth pair with each end in its task's namespace,
// addresses them and brings them up.
func (f *Fabric) addLink(l Link) error {
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name: l.PS.Name, TxQLen: -1, NumTxQueues: 1, NumRxQueues: 1,
			Namespace: netlink.NsFd(f.ns[l.PS.Task]),
		},
		PeerName:   l.Worker.Name,
		PeerTxQLen: -1, PeerNumTxQueues: 1, PeerNumRxQueues: 1,
		PeerNamespace: netlink.NsFd(f.ns[l.Worker.Task]),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("vethnet: veth %s (%s) - %s (%s): %w", l.PS.Name, l.PS.Task, l.Worker.Name, l.Worker.Task, err)
	}
	for _, e := range []End{l.PS, l.Worker} {
		h, err := f.handle(e.Task)
		if err != nil {
			return err
		}
		link, err := h.LinkByName(e.Name)
		if err == nil {
			err = h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: e.Addr.AsSlice(), Mask: net.CIDRMask(30, 32)}})
		}
		if err == nil {
			err = h.LinkSetUp(link)
		}
		h.Close()
		if err != nil {
			return fmt.Errorf("vethnet: configure %s of %s: %w", e.Name, e.Task, err)
		}
	}
	return nil
}

// waitUp waits for the kernel to report e operationally up: until its link
// watch has run, packets sent on it are dropped.
func (f *Fabric) waitUp(e End) error {
	h, err := f.handle(e.Task)
	if err != nil {
		return err
	}
	defer h.Close()
	deadline := time.Now().Add(linkUpTimeout)
	for {
		l, err := h.LinkByName(e.Name)
		if err != nil {
			return fmt.Errorf("vethnet: %s of %s: %w", e.Name, e.Task, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("vethnet: %s of %s not up after %v", e.Name, e.Task, linkUpTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Do runs fn on a thread inside task's namespace: sockets fn opens belong
// to it and keep working from any goroutine afterwards.
func (f *Fabric) Do(task string, fn func() error) error {
	ns, ok := f.ns[task]
	if !ok {
		return fmt.Errorf("vethnet: no namespace for %s", task)
	}
	return netns.Do(ns, fn)
}

// Close drops the fabric's hold on the namespaces; each goes, with its
// veth ends, once the sockets opened in it are closed too.
func (f *Fabric) Close() error {
	var errs []error
	for task, h := range f.ns {
		if err := h.Close(); err != nil {
			errs = append(errs, fmt.Errorf("vethnet: close namespace of %s: %w", task, err))
		}
	}
	f.ns = nil
	return errors.Join(errs...)
}
