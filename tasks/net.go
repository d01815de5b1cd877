package tasks

import (
	"fmt"
	"io"
	"net"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// A Net makes the starwire transport of one process: a task's, which both
// serves and dials its peers, or a driver's, which only dials. Every
// process of a cluster must use the same kind.
type Net interface {
	// Name describes the transport for people ("TCP", ...).
	Name() string
	// Listen binds the task's starwire address and returns its listener,
	// the transport its peer calls go out on, and what to close at the end
	// (nil when nothing beyond the listener).
	Listen(bind string) (rpc.Listener, rpc.Transport, io.Closer, error)
	// Dialer returns a transport for a process that serves nothing.
	Dialer() (rpc.Transport, io.Closer, error)
}

// TCPNet carries starwire over TCP. A task's transport gets reactors of
// its own, as many as DeepRec's per-role variables say for Job
// (NETWORK_PS_CORE_NUMBER, NETWORK_WORKER_CORE_NUMBER), else
// SEASTAR_CORE_NUMBER, and no more than Conns when it is known: the
// connections the task will have (cluster.Reactors).
type TCPNet struct {
	Job   string
	Conns int
	// TLS, when set, secures every connection, served or dialed, with
	// mutual TLS 1.3.
	TLS *tcp.TLSFiles
}

// Name implements Net.
func (TCPNet) Name() string { return "TCP" }

// Listen implements Net.
func (n TCPNet) Listen(bind string) (rpc.Listener, rpc.Transport, io.Closer, error) {
	cfg, err := tlsConfig(n.TLS)
	if err != nil {
		return nil, nil, nil, err
	}
	rs := tcp.NewReactors(cluster.RoleCoreNumber(n.Job, n.Conns))
	tr := &tcp.Transport{Reactors: rs, TLS: cfg, PlaintextHint: plaintextHint(n.TLS)}
	l, err := tr.Listen(bind)
	if err != nil {
		rs.Stop()
		return nil, nil, nil, err
	}
	return l, tr, reactorsCloser{rs}, nil
}

// reactorsCloser stops a task's reactors when the task closes.
type reactorsCloser struct{ rs *tcp.Reactors }

func (c reactorsCloser) Close() error {
	c.rs.Stop()
	return nil
}

// Dialer implements Net.
func (n TCPNet) Dialer() (rpc.Transport, io.Closer, error) {
	cfg, err := tlsConfig(n.TLS)
	if err != nil {
		return nil, nil, err
	}
	return &tcp.Transport{TLS: cfg, PlaintextHint: plaintextHint(n.TLS)}, nil, nil
}

// UDPNet carries starwire with afxdp's reliable packet protocol over kernel
// UDP sockets: the path a host without AF_XDP takes to talk to peers that
// use it, and a way to run that protocol under a real workload anywhere.
// Host is the address a dial-only endpoint binds.
type UDPNet struct {
	Host string
	// Pcap, when set, receives every datagram the endpoints send and
	// receive, as Ethernet/IPv4/UDP frames.
	Pcap Capture
	// Auth says who may open sessions with the endpoints.
	Auth PacketAuth
}

// Name implements Net.
func (UDPNet) Name() string { return "the afxdp packet protocol on kernel UDP" }

// Listen implements Net: one endpoint serves the task and carries its
// calls to peers.
func (n UDPNet) Listen(bind string) (rpc.Listener, rpc.Transport, io.Closer, error) {
	ep, err := udpEndpoint(bind, n.Auth.options(afxdp.Options{}), n.Pcap)
	if err != nil {
		return nil, nil, nil, err
	}
	tr := afxdprpc.TransportOver(ep, netpath.UDP)
	l, err := tr.Listen("")
	if err != nil {
		ep.Close()
		return nil, nil, nil, err
	}
	return l, tr, ep, nil
}

// Dialer implements Net with an endpoint that accepts no sessions.
func (n UDPNet) Dialer() (rpc.Transport, io.Closer, error) {
	host := n.Host
	if host == "" {
		host = "127.0.0.1"
	}
	ep, err := udpEndpoint(net.JoinHostPort(host, "0"), n.Auth.options(afxdp.Options{Backlog: -1}), n.Pcap)
	if err != nil {
		return nil, nil, err
	}
	return afxdprpc.TransportOver(ep, netpath.UDP), ep, nil
}

func udpEndpoint(bind string, opts afxdp.Options, pcap Capture) (*afxdp.Endpoint, error) {
	var l link.Link
	l, err := link.ListenUDP(bind, link.UDPOptions{})
	if err != nil {
		return nil, fmt.Errorf("udp endpoint: %w", err)
	}
	if pcap != nil {
		l = pcap.Link(l)
	}
	return afxdp.NewEndpoint(l, opts), nil
}
