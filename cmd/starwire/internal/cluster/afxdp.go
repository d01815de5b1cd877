package cluster

import (
	"fmt"
	"net/netip"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
)

// ServeAFXDP opens an AF_XDP endpoint on interface iface at the UDP port
// of the task's starwire address, serves the worker service on it as well,
// and makes the task's calls to its peers (a remote _Recv's RecvTensor, the
// bulk of the traffic) go over it. The driver's calls stay on the stream
// transport, as control traffic. Every task of the cluster must do the
// same, with its starwire address on its own interface. Call it before
// Start; an error wrapping afxdp.ErrUnavailable means this machine or
// interface cannot, and the task keeps its stream transport.
func (s *Server) ServeAFXDP(iface string) error {
	if s.starL == nil {
		return fmt.Errorf("cluster: %s: AF_XDP needs the starwire worker service (protocol grpc+seastar)", s.Task())
	}
	ap, err := netip.ParseAddrPort(s.StarAddr)
	if err != nil {
		return fmt.Errorf("cluster: %s: starwire address %s: %w", s.Task(), s.StarAddr, err)
	}
	link, err := afxdp.OpenXSK(iface, afxdp.XSKOptions{Port: ap.Port()})
	if err != nil {
		return fmt.Errorf("cluster: %s: %w", s.Task(), err)
	}
	if got := link.LocalAddr(); got != ap {
		link.Close()
		return fmt.Errorf("cluster: %s: %s has address %v, not the starwire address %v", s.Task(), iface, got.Addr(), ap.Addr())
	}
	ep := afxdp.NewEndpoint(link, afxdp.Options{})
	tr := afxdprpc.Transport(ep)
	l, err := tr.Listen("")
	if err != nil {
		ep.Close()
		return fmt.Errorf("cluster: %s: %w", s.Task(), err)
	}
	s.xdpL, s.xdpEP, s.peerTr = l, ep, tr
	s.PeerTransport = fmt.Sprintf("AF_XDP on %s (UDP port %d)", iface, ap.Port())
	return nil
}
