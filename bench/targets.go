package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire/tfpb"
)

// The protocols a sweep compares.
const (
	ProtoGRPC    = "grpc"           // gRPC-Go, default options but raised message limits
	ProtoTCP     = "starwire-tcp"   // starwire over TCP
	ProtoUDP     = "starwire-udp"   // starwire over afxdp's packet protocol on kernel UDP
	ProtoAFXDP   = "starwire-afxdp" // starwire over AF_XDP
	protoListSep = ","
)

// The dual connection's contenders: one client transport (TCP with an
// AF_XDP session beside it, afxdprpc.Dual) to one dual server over the
// sweep's veth pair, under each path policy. They differ only in the
// policy, so that their ratios measure the path choice alone.
const (
	ProtoDualAuto  = "dual-auto"  // afxdprpc.PathAuto: the chooser picks per call
	ProtoDualTCP   = "dual-tcp"   // afxdprpc.PathTCPOnly: every call over TCP
	ProtoDualAFXDP = "dual-afxdp" // afxdprpc.PathAFXDP: every call over AF_XDP
)

// Protocols are the protocols a sweep can run by default, in the order it
// runs them.
var Protocols = []string{ProtoGRPC, ProtoTCP, ProtoUDP, ProtoAFXDP}

// DualProtocols are the dual connection's contenders.
var DualProtocols = []string{ProtoDualAuto, ProtoDualTCP, ProtoDualAFXDP}

// overVeth reports whether protocol p runs over the sweep's veth pair,
// served by ServeXDP.
func overVeth(p string) bool {
	return p == ProtoAFXDP || dualPolicy(p) != nil
}

// dualPolicy is the path policy of dual contender p, nil for another
// protocol.
func dualPolicy(p string) *afxdprpc.PathPolicy {
	switch p {
	case ProtoDualAuto:
		return &afxdprpc.PathPolicy{Mode: afxdprpc.PathAuto}
	case ProtoDualTCP:
		return &afxdprpc.PathPolicy{Mode: afxdprpc.PathTCPOnly}
	case ProtoDualAFXDP:
		return &afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP}
	}
	return nil
}

// ErrUnavailable marks a protocol this machine cannot run (AF_XDP without
// root or a veth); the sweep leaves it out and says why.
var ErrUnavailable = errors.New("unavailable here")

// Targets are servers of some protocols, by protocol name.
type Targets struct {
	Addrs   map[string]string
	closers []io.Closer
}

// Close stops the servers.
func (t *Targets) Close() error {
	for i := len(t.closers) - 1; i >= 0; i-- {
		t.closers[i].Close()
	}
	return nil
}

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// ServeTargets starts servers of protos on loopback, the TCP one with
// cores reactors (SEASTAR_CORE_NUMBER; 0 means the process's default).
// AF_XDP is served apart, by ServeXDP.
func ServeTargets(protos []string, cores int) (*Targets, error) {
	t := &Targets{Addrs: map[string]string{}}
	fail := func(err error) (*Targets, error) {
		t.Close()
		return nil, err
	}
	for _, p := range protos {
		switch p {
		case ProtoGRPC:
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return fail(fmt.Errorf("bench: serve %s: %w", p, err))
			}
			s := NewGRPCServer()
			go s.Serve(l)
			t.closers = append(t.closers, s)
			t.Addrs[p] = l.Addr().String()
		case ProtoTCP:
			tr := &tcp.Transport{}
			if cores > 0 {
				rs := tcp.NewReactors(cores)
				tr.Reactors = rs
				t.closers = append(t.closers, closeFunc(func() error { rs.Stop(); return nil }))
			}
			l, err := tr.Listen("127.0.0.1:0")
			if err != nil {
				return fail(fmt.Errorf("bench: serve %s: %w", p, err))
			}
			s := NewStarwireServer()
			go s.Serve(l)
			t.closers = append(t.closers, s)
			t.Addrs[p] = l.Addr().String()
		case ProtoUDP:
			ep, err := udpEndpoint(fanInServer)
			if err != nil {
				return fail(err)
			}
			t.closers = append(t.closers, ep)
			l, err := afxdprpc.Transport(ep).Listen("")
			if err != nil {
				return fail(fmt.Errorf("bench: serve %s: %w", p, err))
			}
			s := NewStarwireServer()
			go s.Serve(l)
			t.closers = append(t.closers, s)
			t.Addrs[p] = ep.Addr().String()
		case ProtoAFXDP, ProtoDualAuto, ProtoDualTCP, ProtoDualAFXDP:
			return fail(fmt.Errorf("bench: %s is served on its own interface, by ServeXDP", p))
		default:
			return fail(Available(p))
		}
	}
	return t, nil
}

func udpEndpoint(opts afxdp.Options) (*afxdp.Endpoint, error) {
	link, err := link.ListenUDP("127.0.0.1:0", link.UDPOptions{})
	if err != nil {
		return nil, fmt.Errorf("bench: udp endpoint: %w", err)
	}
	return afxdp.NewEndpoint(link, opts), nil
}

// FormatAddrs writes addrs as one line ParseTargetAddrs reads.
func FormatAddrs(addrs map[string]string) string {
	var parts []string
	for p, a := range addrs {
		parts = append(parts, p+"="+a)
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// ParseTargetAddrs reads a line of FormatAddrs.
func ParseTargetAddrs(line string) (map[string]string, error) {
	addrs := map[string]string{}
	for _, f := range strings.Fields(line) {
		p, a, ok := strings.Cut(f, "=")
		if !ok || a == "" {
			return nil, fmt.Errorf("bench: malformed address %q", f)
		}
		addrs[p] = a
	}
	return addrs, nil
}

// A caller makes one call (or one step of a mix) of a workload; each
// caller is used by one goroutine.
type caller func(ctx context.Context) error

// A conn is one protocol's client connection, from which callers are made.
type conn interface {
	caller(w Workload, size int) (caller, error)
	Close() error
}

// dial connects to protocol proto's server at addr.
func dial(proto, addr string) (conn, error) {
	switch proto {
	case ProtoGRPC:
		c, err := DialGRPC(addr)
		if err != nil {
			return nil, err
		}
		return grpcConn{c}, nil
	case ProtoTCP:
		return &starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: &tcp.Transport{}})}, nil
	case ProtoUDP:
		ep, err := udpEndpoint(afxdp.Options{Ticket: PacketTicket, Backlog: -1})
		if err != nil {
			return nil, err
		}
		return &starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Transport(ep)}), ep: ep}, nil
	}
	return nil, fmt.Errorf("bench: cannot dial protocol %q", proto)
}

type starConn struct {
	c  *rpc.Client
	ep io.Closer
}

// dualConn is a dual contender's connection, which counts its paths.
type dualConn struct {
	*starConn
	dual *afxdprpc.DualTransport
}

// A pathCounter is a connection that counts the calls each path carried:
// TCP's and AF_XDP's, and whether its packet path is open.
type pathCounter interface {
	pathCalls() (tcp, afxdp uint64, open bool)
}

func (d dualConn) pathCalls() (tcp, bypass uint64, open bool) {
	st := d.dual.Totals()
	return st.TCPCalls, st.AFXDPCalls, st.Packet != ""
}

func (s *starConn) Close() error {
	s.c.Close()
	if s.ep != nil {
		s.ep.Close()
	}
	return nil
}

func (s *starConn) caller(w Workload, size int) (caller, error) {
	sc := NewStarwireClient(s.c)
	switch w {
	case WorkEcho:
		req, resp := echoPayload(size), make([]byte, size)
		return func(ctx context.Context) error { return sc.Echo(ctx, req, resp) }, nil
	case WorkRecvTensor:
		dst := make([]byte, size)
		return func(ctx context.Context) error { return sc.FetchInto(ctx, dst) }, nil
	case WorkFuse:
		return func(ctx context.Context) error { return sc.Fuse(ctx, FuseKeys, size) }, nil
	case WorkPSMix:
		ctl, ctlResp := &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: "step"}, new(tfpb.RecvTensorResponse)
		dst, grad, gradResp := make([]byte, size), echoPayload(size), make([]byte, size)
		meta := NewStarwireClient(s.c) // its reply lands no tensors in dst
		return func(ctx context.Context) error {
			if err := meta.Control(ctx, ctl, ctlResp); err != nil {
				return err
			}
			for range 2 {
				if err := sc.FetchInto(ctx, dst); err != nil {
					return err
				}
			}
			return meta.Echo(ctx, grad, gradResp)
		}, nil
	}
	return nil, fmt.Errorf("bench: unknown workload %q", w)
}

type grpcConn struct{ c *GRPCClient }

func (g grpcConn) Close() error { return g.c.Close() }

func (g grpcConn) caller(w Workload, size int) (caller, error) {
	switch w {
	case WorkEcho:
		req := echoPayload(size)
		return func(ctx context.Context) error { _, err := g.c.Echo(ctx, req); return err }, nil
	case WorkRecvTensor:
		return func(ctx context.Context) error { _, err := g.c.Fetch(ctx, size); return err }, nil
	case WorkFuse:
		return nil, fmt.Errorf("bench: gRPC has no FuseRecvTensor: %w", ErrUnavailable)
	case WorkPSMix:
		ctl, ctlResp := &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: "step"}, new(tfpb.RecvTensorResponse)
		grad := echoPayload(size)
		return func(ctx context.Context) error {
			if err := g.c.Control(ctx, ctl, ctlResp); err != nil {
				return err
			}
			for range 2 {
				if _, err := g.c.Fetch(ctx, size); err != nil {
					return err
				}
			}
			_, err := g.c.Echo(ctx, grad)
			return err
		}, nil
	}
	return nil, fmt.Errorf("bench: unknown workload %q", w)
}

// packetPathWait bounds how long a dual contender's warm-up goes on for its
// packet path to open: the hello and the session's handshake can take
// longer than a short warm-up on a loaded machine.
const packetPathWait = 10 * time.Second

// awaitPacketPath returns pc's path counts once its packet path is open,
// calling with callers a warm-up (at least 20 ms) at a time while it is not,
// for at most packetPathWait; open is false when it never opened.
func awaitPacketPath(ctx context.Context, callers []caller, pc pathCounter, warmup time.Duration) (tcp, bypass uint64, open bool) {
	warmup = max(warmup, 20*time.Millisecond)
	deadline := time.Now().Add(packetPathWait)
	for {
		if tcp, bypass, open = pc.pathCalls(); open || time.Now().After(deadline) || ctx.Err() != nil {
			return tcp, bypass, open
		}
		driveClosed(ctx, callers, warmup)
	}
}
