package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdpfabric"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// The UDP ports of the AF_XDP points' server and client links.
const (
	xdpServerPort = 7800
	xdpClientPort = 7801
)

// xdpNet is what AF_XDP points run over: a veth pair between two network
// namespaces the sweep makes, servers on end A, clients on end B. XDP never
// sees loopback traffic, so AF_XDP needs an interface at each end.
type xdpNet struct {
	pair *netns.Pair
	// client is end B's endpoint, opened by the first dial and shared by
	// every client after it: an AF_XDP socket owns its interface queue, so
	// the clients of a sliced measurement, connected at once, share one.
	client *afxdp.Endpoint
}

// newXDPNet makes the pair, or says why AF_XDP is unavailable here.
func newXDPNet() (*xdpNet, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("bench: %s needs root (network namespaces, AF_XDP sockets): %w", ProtoAFXDP, ErrUnavailable)
	}
	p, err := netns.New(netns.Options{Queues: 1})
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %v: %w", ProtoAFXDP, err, ErrUnavailable)
	}
	if err := p.A.Do(func() error { return link.Available(p.A.Link) }); err != nil {
		p.Close()
		return nil, fmt.Errorf("bench: %s: %v: %w", ProtoAFXDP, err, ErrUnavailable)
	}
	return &xdpNet{pair: p}, nil
}

func (x *xdpNet) Close() error {
	if x.client != nil {
		x.client.Close()
	}
	return x.pair.Close()
}

// request is the spawn request of the AF_XDP server: on end A, started in
// A's namespace.
func (x *xdpNet) request(cores int) SpawnRequest {
	return SpawnRequest{
		Protocols: []string{ProtoAFXDP}, Cores: cores,
		XDPIface: x.pair.A.Link, XDPPort: xdpServerPort, InNamespace: x.pair.A.Do,
	}
}

// ServeXDP serves the starwire contender over AF_XDP on interface iface
// at UDP port port, in the calling thread's network namespace, and the dual
// contenders beside it: a dual listener (afxdprpc.Dual) on TCP at the
// interface's address whose packet path is that same endpoint. A session
// opened straight to the endpoint (ProtoAFXDP) and one a dual client opens
// after its hello are served alike; one endpoint serves both, since an
// AF_XDP socket owns its interface queue.
func ServeXDP(iface string, port uint16) (*Targets, error) {
	ip, err := ifaceAddr(iface)
	if err != nil {
		return nil, err
	}
	ep, err := afxdpfabric.OpenEndpoint(iface, link.XSKOptions{Port: port}, fanInServer, nil)
	if err != nil {
		return nil, fmt.Errorf("bench: serve %s on %s: %w", ProtoAFXDP, iface, err)
	}
	dual := afxdprpc.Dual(&tcp.Transport{}, ep, afxdprpc.DualOptions{Path: netpath.AFXDP, Logger: quiet})
	l, err := dual.Listen(net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("bench: serve %s: %w", ProtoAFXDP, err)
	}
	s := NewStarwireServer()
	go s.Serve(l)
	addrs := map[string]string{ProtoAFXDP: ep.Addr().String()}
	for _, p := range DualProtocols {
		addrs[p] = l.Addr().String()
	}
	return &Targets{Addrs: addrs, closers: []io.Closer{ep, s}}, nil
}

// ifaceAddr is interface name's IPv4 address.
func ifaceAddr(name string) (netip.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bench: serve on %s: %w", name, err)
	}
	as, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("bench: serve on %s: %w", name, err)
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP.To4()); ok && n.IP.To4() != nil {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("bench: serve on %s: the interface has no IPv4 address", name)
}

// quiet is the dual transports' logger: which path a connection takes is
// what the sweep measures and reports, so the log lines add nothing.
var quiet = slog.New(slog.DiscardHandler)

// fanInServer is how the packet path's servers take a fan-in sweep's
// peers: sessions from a few addresses, a thousand of which may open at
// once on a busy machine, as a TCP listener's backlog (somaxconn, 4096)
// would take them.
var fanInServer = afxdp.Options{Ticket: PacketTicket, MaxPeerSessions: 4096, Backlog: 4096}

// dial opens a client of protocol proto on end B, over the endpoint all
// of them share: over AF_XDP alone, or a dual connection under the
// contender's path policy.
func (x *xdpNet) dial(proto, addr string) (conn, error) {
	if x.client == nil {
		ep, err := afxdpfabric.OpenEndpoint(x.pair.B.Link, link.XSKOptions{Port: xdpClientPort},
			afxdp.Options{Ticket: PacketTicket, Backlog: -1}, x.pair.B.Do)
		if err != nil {
			return nil, fmt.Errorf("bench: dial %s: %w", proto, err)
		}
		x.client = ep
	}
	ep := x.client
	policy := dualPolicy(proto)
	if policy == nil {
		return &starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Transport(ep)})}, nil
	}
	dual := afxdprpc.Dual(&nsTCP{end: x.pair.B}, ep, afxdprpc.DualOptions{Path: netpath.AFXDP, Policy: *policy, Logger: quiet})
	return dualConn{&starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: dual})}, dual}, nil
}

// nsTCP dials TCP from a namespace's end; the connection stays there.
type nsTCP struct {
	tcp.Transport
	end *netns.End
}

func (n *nsTCP) Dial(ctx context.Context, addr string) (c rpc.Conn, err error) {
	err = n.end.Do(func() error { c, err = n.Transport.Dial(ctx, addr); return err })
	return c, err
}

// A fan-in sweep serves starwire-afxdp as the other sweep does, on end A
// of a veth pair, and runs its client processes in end B's namespace.
// Their endpoints use kernel UDP sockets there, not AF_XDP: an AF_XDP
// socket owns an interface queue, and what the server sends all arrives
// on queue 0 of end B, so only one process could listen there. The
// server, whose memory and CPU a fan-in point measures, is on the AF_XDP
// path whichever way its peers send.

// peersNets makes the veth pair of a fan-in sweep's AF_XDP points, once.
type peersNets struct {
	x   *xdpNet
	err error
}

// point returns the spawn request of point p and the sweep configuration
// its clients run under: for AF_XDP, in end B's namespace.
func (n *peersNets) point(p Point, cfg SweepConfig) (SpawnRequest, SweepConfig, error) {
	if err := Available(p.Protocol); err != nil {
		return SpawnRequest{}, cfg, err
	}
	if p.Protocol != ProtoAFXDP {
		return SpawnRequest{Protocols: []string{p.Protocol}, Cores: p.Cores}, cfg, nil
	}
	if n.x == nil && n.err == nil {
		n.x, n.err = newXDPNet()
	}
	if n.err != nil {
		return SpawnRequest{}, cfg, n.err
	}
	run := cfg.Clients
	if run == nil {
		run = RunPeers
	}
	b := n.x.pair.B
	cfg.Clients = func(ctx context.Context, spec PeersSpec) PeersResult {
		spec.Netns, spec.Bind = b.NS, netip.AddrPortFrom(b.Addr, 0).String()
		return run(ctx, spec)
	}
	return n.x.request(p.Cores), cfg, nil
}

func (n *peersNets) Close() error {
	if n.x == nil {
		return nil
	}
	return n.x.Close()
}

// peersEndpoint opens the endpoint whose sessions are a fan-in client
// process's peers: on loopback, or in namespace spec.Netns bound to
// spec.Bind.
func peersEndpoint(spec PeersSpec) (*afxdp.Endpoint, error) {
	opts := afxdp.Options{Ticket: PacketTicket, Backlog: -1}
	if spec.Netns == "" {
		return udpEndpoint(opts)
	}
	h, err := netns.OpenNamed(spec.Netns)
	if err != nil {
		return nil, fmt.Errorf("bench: peers in %s: %w", spec.Netns, err)
	}
	defer h.Close()
	var l *link.UDPLink
	err = netns.Do(h, func() (err error) {
		l, err = link.ListenUDP(spec.Bind, link.UDPOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: peers in %s: %w", spec.Netns, err)
	}
	return afxdp.NewEndpoint(l, opts), nil
}
