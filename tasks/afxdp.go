package tasks

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/afxdpfabric"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// ServeAFXDP opens an AF_XDP endpoint on interface iface at the UDP port
// of the task's starwire address, serves the worker service on it as well,
// and makes the task's calls to its peers (a remote _Recv's RecvTensor, the
// bulk of the traffic) go over it: when the starwire transport is TCP,
// each call over AF_XDP or TCP as AFXDPPath picks for its size (a dual
// connection per peer, see peerDuals), otherwise every call over AF_XDP.
// The driver's calls stay on the stream transport, as control traffic.
// Every task of the cluster must do the same, with its starwire address on
// its own interface. Call it before Start; an error wrapping
// link.ErrUnavailable means this machine or interface cannot, and the task
// keeps its stream transport.
func (s *Server) ServeAFXDP(iface string) error {
	if s.starL == nil {
		return fmt.Errorf("%s: AF_XDP needs the starwire worker service (protocol grpc+seastar)", s.Task())
	}
	ap, err := netip.ParseAddrPort(s.StarAddr)
	if err != nil {
		return fmt.Errorf("%s: starwire address %s: %w", s.Task(), s.StarAddr, err)
	}
	ep, err := s.addAFXDP(iface, ap.Port(), nil)
	if err != nil {
		return err
	}
	if got := ep.Addr(); got != ap {
		return fmt.Errorf("%s: %s has address %v, not the starwire address %v", s.Task(), iface, got.Addr(), ap.Addr())
	}
	s.PeerTransport = fmt.Sprintf("AF_XDP on %s (UDP port %d)", iface, ap.Port())
	if tt, ok := s.starTr.(*tcp.Transport); ok {
		s.peerDuals = newPeerDuals(tt, ep, s.AFXDPPath)
		s.peerTr = s.peerDuals
		s.PeerTransport += " or TCP, per call (" + s.AFXDPPath.String() + ")"
		return nil
	}
	s.peerTr = afxdprpc.Transport(ep)
	return nil
}

// addAFXDP opens an AF_XDP endpoint on iface at UDP port, inside the
// namespace in runs its function in (nil: this thread's), and serves the
// worker service on it once the task starts. The server closes it.
func (s *Server) addAFXDP(iface string, port uint16, in func(func() error) error) (*afxdp.Endpoint, error) {
	xo, opts := s.endpointOptions()
	xo.Port = port
	ep, err := afxdpfabric.OpenEndpoint(iface, xo, opts, in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Task(), err)
	}
	if err := s.serveEndpoint(ep); err != nil {
		ep.Close()
		return nil, err
	}
	return ep, nil
}

// endpointOptions are the options of the task's AF_XDP endpoints: its
// capture, and its packet ticket, polling and pinning.
func (s *Server) endpointOptions() (link.XSKOptions, afxdp.Options) {
	var xo link.XSKOptions
	if s.Pcap != nil {
		xo.Pcap = s.Pcap.Stream()
	}
	// DeepRec's *_ENABLE_POLLING and *_DISABLE_PIN_CORES tune the reactor.
	busy, pollSet := cluster.PacketPolling(s.Job)
	return xo, s.PacketAuth.options(afxdp.TaskOptions(busy, pollSet, cluster.PinPacketReactors(s.Job), 0))
}

// serveEndpoint serves the worker service on ep once the task starts; the
// server closes ep.
func (s *Server) serveEndpoint(ep *afxdp.Endpoint) error {
	l, err := afxdprpc.Transport(ep).Listen("")
	if err != nil {
		return fmt.Errorf("%s: %w", s.Task(), err)
	}
	s.xdpLs = append(s.xdpLs, l)
	s.xdpEPs = append(s.xdpEPs, ep)
	return nil
}

// fabricRoute makes s's calls to peer go through the link of fabric f
// whose end in s is ep and whose end in peer is far. When s's starwire
// transport is TCP, each call goes whole over the link's AF_XDP session or
// over TCP to peer's starwire address, whichever policy picks for its size
// (a dual connection, afxdprpc.Dual); otherwise over AF_XDP alone.
func (s *Server) fabricRoute(f *afxdpfabric.Fabric, peer *Server, ep *afxdp.Endpoint, far vethnet.End, policy afxdprpc.PathPolicy) (dual bool) {
	packet := f.Packet(far)
	if tt, ok := s.starTr.(*tcp.Transport); ok && peer.StarAddr != "" {
		// Made by Start, which has the logger.
		s.dualRoutes = append(s.dualRoutes, dualRoute{peer: peer.Task(), addr: peer.StarAddr, tcp: tt, ep: ep,
			opts: afxdprpc.DualOptions{Path: netpath.AFXDP, Packet: packet, Policy: policy}})
		return true
	}
	if s.routes == nil {
		s.routes = make(map[string]route)
	}
	s.routes[peer.Task()] = route{afxdprpc.Transport(ep), packet}
	return false
}

// A dualRoute is a route over a dual connection to peer, at its starwire
// address addr over TCP and over ep, as opts say.
type dualRoute struct {
	peer, addr string
	tcp        *tcp.Transport
	ep         *afxdp.Endpoint
	opts       afxdprpc.DualOptions
}

// startDuals makes the task's dual connections to its peers, routes
// their calls through them, and has them log to logger: only warnings and
// errors, so that their choice of path stays out of the output while it
// works, and failures show.
func (s *Server) startDuals(peers *Peers, logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	logger = slog.New(minLevel{logger.Handler(), slog.LevelWarn})
	for _, r := range s.dualRoutes {
		o := r.opts
		o.Logger = logger
		d := afxdprpc.Dual(r.tcp, r.ep, o)
		s.duals = append(s.duals, d)
		peers.Route(r.peer, d, r.addr)
	}
	if s.peerDuals != nil {
		s.peerDuals.logger = logger
	}
}

// minLevel is a slog.Handler that passes on the records of level min and
// above only.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

// PathStats returns, for each of the task's dual connections to its peers,
// the calls and bytes each path carried and the current crossover.
func (s *Server) PathStats() []afxdprpc.PathStats {
	var out []afxdprpc.PathStats
	for _, d := range s.duals {
		out = append(out, d.Stats()...)
	}
	return out
}

// PeerPathTotals returns, for each peer a task serving AF_XDP called over
// dual connections (ServeAFXDP), what those connections carried over each
// path, the closed ones too; nil without them.
func (s *Server) PeerPathTotals() []afxdprpc.PathStats {
	if s.peerDuals == nil {
		return nil
	}
	return s.peerDuals.totals()
}
