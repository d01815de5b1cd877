package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Options configure a Pair. The zero Options give one queue per veth end
// and the kernel's default MTU.
type Options struct {
	// Queues is the number of TX and RX queues of each veth end. A fresh
	// veth otherwise gets one queue per CPU, and an AF_XDP socket bound to
	// queue 0 alone would miss traffic hashed to the others.
	Queues int
	// MTU of both ends; 0 keeps the default (1500).
	MTU int
}

// End is one side of a Pair: a named namespace holding one veth end.
type End struct {
	// NS is the namespace's name under /run/netns (usable with `ip netns exec`).
	NS string
	// Link is the veth end's name inside NS.
	Link string
	// Ifindex is the veth end's interface index inside NS.
	Ifindex int
	// MAC is the veth end's hardware address.
	MAC net.HardwareAddr
	// Addr is the end's IPv4 address, in Prefix.
	Addr netip.Addr
	// Prefix is the /24 both ends share.
	Prefix netip.Prefix

	handle vnetns.NsHandle
}

// Pair is two namespaces, A and B, joined by a veth pair whose ends are up
// and addressed; loopback is up in both.
type Pair struct {
	A, B   *End
	closed bool
}

var (
	seq       atomic.Uint32
	sweepOnce sync.Once
)

// New creates a Pair. Names include the pid and a per-process sequence
// number, so test binaries running in parallel do not collide; addresses
// are 198.18.x.1 and 198.18.x.2 (or 198.19.x.*), x derived the same way.
// The caller must Close it.
func New(opts Options) (_ *Pair, err error) {
	if opts.Queues == 0 {
		opts.Queues = 1
	}
	sweepOnce.Do(func() { SweepStale() }) // best effort
	n := seq.Add(1)
	pid := os.Getpid()
	tag := fmt.Sprintf("%d-%d", pid, n)
	v := uint32(pid)*7 + n
	prefix := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, byte(18 + (v>>8)&1), byte(v), 0}), 24)
	p := &Pair{
		A: &End{NS: "sw-" + tag + "-a", Link: fmt.Sprintf("swa%x", v&0xffffff), Prefix: prefix, Addr: prefix.Addr().Next(), handle: -1},
		B: &End{NS: "sw-" + tag + "-b", Link: fmt.Sprintf("swb%x", v&0xffffff), Prefix: prefix, Addr: prefix.Addr().Next().Next(), handle: -1},
	}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if err := createNamespaces(p.A, p.B); err != nil {
		return nil, err
	}
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name: p.A.Link, MTU: opts.MTU, TxQLen: -1,
			NumTxQueues: opts.Queues, NumRxQueues: opts.Queues,
			Namespace: netlink.NsFd(p.A.handle),
		},
		PeerName:        p.B.Link,
		PeerTxQLen:      -1,
		PeerNumTxQueues: uint32(opts.Queues), PeerNumRxQueues: uint32(opts.Queues),
		PeerMTU:       uint32(opts.MTU),
		PeerNamespace: netlink.NsFd(p.B.handle),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("netns: add veth %s/%s: %w", p.A.Link, p.B.Link, err)
	}
	for _, e := range []*End{p.A, p.B} {
		if err := e.configure(); err != nil {
			return nil, err
		}
	}
	for _, e := range []*End{p.A, p.B} {
		if err := e.waitUp(linkUpTimeout); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// linkUpTimeout bounds the wait for the kernel to bring a veth end up.
const linkUpTimeout = 10 * time.Second

// waitUp waits until the kernel reports e's veth end operationally up.
// Setting a link up only schedules the work that attaches its transmit
// queue (the kernel's link watch, rate-limited to about once a second);
// until it has run, packets sent on the link are silently dropped.
func (e *End) waitUp(timeout time.Duration) error {
	h, err := netlink.NewHandleAt(e.handle)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", e.NS, err)
	}
	defer h.Close()
	deadline := time.Now().Add(timeout)
	for {
		l, err := h.LinkByIndex(e.Ifindex)
		if err != nil {
			return fmt.Errorf("netns: link %s: %w", e.Link, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("netns: %s not up after %v (state %s)", e.Link, timeout, l.Attrs().OperState)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// createNamespaces creates the ends' named namespaces.
func createNamespaces(ends ...*End) error {
	for _, e := range ends {
		h, err := NewNamed(e.NS)
		if err != nil {
			return fmt.Errorf("netns: create %s: %w", e.NS, err)
		}
		e.handle = h
	}
	return nil
}

// configure brings loopback and the veth end up inside e's namespace and
// assigns its address.
func (e *End) configure() error {
	h, err := netlink.NewHandleAt(e.handle)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", e.NS, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("netns: lo in %s: %w", e.NS, err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("netns: lo up in %s: %w", e.NS, err)
	}
	l, err := h.LinkByName(e.Link)
	if err != nil {
		return fmt.Errorf("netns: %s in %s: %w", e.Link, e.NS, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: e.Addr.AsSlice(), Mask: net.CIDRMask(e.Prefix.Bits(), 32)}}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("netns: address %s on %s: %w", e.Addr, e.Link, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("netns: %s up: %w", e.Link, err)
	}
	e.Ifindex = l.Attrs().Index
	e.MAC = l.Attrs().HardwareAddr
	return nil
}

// Close deletes both namespaces; the veth pair goes with them. It is
// idempotent and safe on a partly built Pair.
func (p *Pair) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, e := range []*End{p.A, p.B} {
		if e.handle >= 0 {
			e.handle.Close()
			e.handle = -1
			if err := vnetns.DeleteNamed(e.NS); err != nil {
				errs = append(errs, fmt.Errorf("netns: delete %s: %w", e.NS, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Peer returns the other end of the pair.
func (p *Pair) Peer(e *End) *End {
	if e == p.A {
		return p.B
	}
	return p.A
}
