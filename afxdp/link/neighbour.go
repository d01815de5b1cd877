package link

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Resolution timing: how often the neighbour table is read while waiting,
// how often the kernel is prodded, and how long a background resolution
// (started by a datagram to an unknown peer) may take.
const (
	neighPoll       = 2 * time.Millisecond
	neighProbeEvery = 200 * time.Millisecond
	neighBackground = 3 * time.Second
	discardPort     = 9
)

// Resolve makes sure the MAC address frames to peer go to is known: the
// peer's own, or its gateway's when it is not on the interface's subnet.
// It reads the kernel's neighbour table and, while the entry is missing or
// incomplete, sends a datagram to the peer's discard port through the
// kernel, which makes the kernel resolve it (ARP). It waits until ctx ends.
func (l *XSKLink) Resolve(ctx context.Context, peer netip.AddrPort) error {
	ip := peer.Addr()
	if _, ok := l.lookup2(ip); ok {
		return nil
	}
	hop, err := l.nextHop(ip)
	if err != nil {
		return err
	}
	var lastProbe time.Time
	for {
		probe := time.Since(lastProbe) >= neighProbeEvery
		if probe {
			lastProbe = time.Now()
		}
		mac, ok, err := l.neighbourOrProbe(ip, hop, probe)
		if err != nil {
			return err
		}
		if ok {
			l.macMu.Lock()
			l.macs[ip] = mac
			l.macMu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("afxdp: resolve %v on %s: %w", ip, l.ifname, ctx.Err())
		case <-time.After(neighPoll):
		}
	}
}

// nextHop returns the address whose MAC frames to ip go to: ip itself, or
// the gateway the kernel routes it through.
func (l *XSKLink) nextHop(ip netip.Addr) (netip.Addr, error) {
	l.resMu.RLock()
	defer l.resMu.RUnlock()
	if l.closed.Load() {
		return ip, fmt.Errorf("afxdp: resolve %v: %w", ip, ErrLinkClosed)
	}
	if routes, err := l.nl.RouteGet(ip.AsSlice()); err == nil && len(routes) > 0 && routes[0].Gw != nil {
		if gw, ok := netip.AddrFromSlice(routes[0].Gw.To4()); ok {
			return gw, nil
		}
	}
	return ip, nil
}

// neighbourOrProbe reads hop's entry from the neighbour table and, when it
// is missing and probe is set, sends a datagram to ip's discard port
// through the kernel, which makes the kernel resolve it (ARP). It holds
// resMu, so Close does not close the netlink handle or the probe socket
// under it (the descriptor could already name another socket).
func (l *XSKLink) neighbourOrProbe(ip, hop netip.Addr, probe bool) ([6]byte, bool, error) {
	l.resMu.RLock()
	defer l.resMu.RUnlock()
	if l.closed.Load() {
		return [6]byte{}, false, fmt.Errorf("afxdp: resolve %v: %w", ip, ErrLinkClosed)
	}
	if mac, ok := l.neighbour(hop); ok {
		return mac, true, nil
	}
	if probe {
		sa := &unix.SockaddrInet4{Addr: ip.As4(), Port: discardPort}
		unix.Sendto(l.probeFD, nil, 0, sa) // errors mean "not yet": keep polling
	}
	return [6]byte{}, false, nil
}

// neighbour reads hop's entry from the kernel's neighbour table; the
// caller holds resMu.
func (l *XSKLink) neighbour(hop netip.Addr) ([6]byte, bool) {
	var mac [6]byte
	neighs, err := l.nl.NeighList(l.ifindex, netlink.FAMILY_V4)
	if err != nil {
		return mac, false
	}
	const usable = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_PERMANENT | netlink.NUD_NOARP
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP.To4())
		if ok && a == hop && n.State&usable != 0 && len(n.HardwareAddr) == 6 {
			copy(mac[:], n.HardwareAddr)
			return mac, true
		}
	}
	return mac, false
}

// lookup2 is lookup for goroutines other than the reactor: it does not
// touch the reactor's cache.
func (l *XSKLink) lookup2(ip netip.Addr) ([6]byte, bool) {
	l.macMu.RLock()
	defer l.macMu.RUnlock()
	mac, ok := l.macs[ip]
	return mac, ok
}

// resolveInBackground is Resolve on its own goroutine, once per address
// at a time, for a datagram the reactor had to drop.
func (l *XSKLink) resolveInBackground(peer netip.AddrPort) {
	ip := peer.Addr()
	if !l.startResolving(ip) {
		return
	}
	go func() {
		defer l.doneResolving(ip)
		ctx, cancel := context.WithTimeout(context.Background(), neighBackground)
		defer cancel()
		l.Resolve(ctx, peer)
	}()
}

func (l *XSKLink) startResolving(ip netip.Addr) bool {
	l.macMu.Lock()
	defer l.macMu.Unlock()
	if l.resolving[ip] {
		return false
	}
	l.resolving[ip] = true
	return true
}

func (l *XSKLink) doneResolving(ip netip.Addr) {
	l.macMu.Lock()
	delete(l.resolving, ip)
	l.macMu.Unlock()
}
