package afxdp

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/netpath"
)

// Opened is what Open started, and on which path.
type Opened struct {
	Group *Group
	// Path is netpath.AFXDP (AF_XDP sockets on the interface's queues) or
	// netpath.UDP (a kernel UDP socket: AF_XDP is unavailable there).
	Path netpath.Path
	// Fallback says why the path is not netpath.AFXDP (nil when it is), for a
	// log line: AF_XDP being unavailable is not an error.
	Fallback error
}

// Open starts the packet protocol on ifname's IPv4 address and port, in the
// calling thread's network namespace: a Group with
// Reactors(opts.Reactors, queues) reactors over AF_XDP when Available says
// it can be used, otherwise one endpoint over a kernel UDP socket, and why
// in Opened.Fallback. Peers of either path interoperate: both speak UDP on
// the same port.
func Open(ifname string, port uint16, opts Options, xo link.XSKOptions) (Opened, error) {
	xo.Port = port
	queues, fallback := link.AvailableQueues(ifname)
	if fallback == nil {
		links, err := link.OpenXSKLinks(ifname, xo, Reactors(opts.Reactors, queues))
		if err == nil {
			ls := make([]link.Link, len(links))
			for i, l := range links {
				ls[i] = l
			}
			return Opened{Group: NewGroup(ls, opts), Path: netpath.AFXDP}, nil
		}
		fallback = err
	}
	addr, err := ifaceAddr(ifname)
	if err != nil {
		return Opened{Fallback: fallback}, err
	}
	l, err := link.ListenUDP(netip.AddrPortFrom(addr, port).String(), link.UDPOptions{})
	if err != nil {
		return Opened{Fallback: fallback}, err
	}
	return Opened{Group: NewGroup([]link.Link{l}, opts), Path: netpath.UDP, Fallback: fallback}, nil
}

// ifaceAddr returns ifname's first IPv4 address.
func ifaceAddr(ifname string) (netip.Addr, error) {
	lk, err := netlink.LinkByName(ifname)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("afxdp: interface %s: %w", ifname, err)
	}
	addrs, err := netlink.AddrList(lk, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("afxdp: interface %s has no IPv4 address", ifname)
	}
	a, _ := netip.AddrFromSlice(addrs[0].IP.To4())
	return a, nil
}
