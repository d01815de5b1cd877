package bench

import (
	"fmt"
	"io"
	"os"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/rpc"
)

// The UDP ports of the AF_XDP points' server and client links.
const (
	xdpServerPort = 7800
	xdpClientPort = 7801
)

// xdpNet is what AF_XDP points run over: a veth pair between two network
// namespaces the sweep makes, servers on end A, clients on end B. XDP never
// sees loopback traffic, so AF_XDP needs an interface at each end.
type xdpNet struct{ pair *netns.Pair }

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

func (x *xdpNet) Close() error { return x.pair.Close() }

// request is the spawn request of the AF_XDP server: on end A, started in
// A's namespace.
func (x *xdpNet) request(cores int) SpawnRequest {
	return SpawnRequest{
		Protocols: []string{ProtoAFXDP}, Cores: cores,
		XDPIface: x.pair.A.Link, XDPPort: xdpServerPort, InNamespace: x.pair.A.Do,
	}
}

// ServeXDP serves the starwire contender over AF_XDP on interface iface
// at UDP port port, in the calling thread's network namespace.
func ServeXDP(iface string, port uint16) (*Targets, error) {
	xl, err := link.OpenXSK(iface, link.XSKOptions{Port: port})
	if err != nil {
		return nil, fmt.Errorf("bench: serve %s on %s: %w", ProtoAFXDP, iface, err)
	}
	ep := afxdp.NewEndpoint(xl, afxdp.Options{Ticket: PacketTicket})
	l, err := afxdprpc.Transport(ep).Listen("")
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("bench: serve %s: %w", ProtoAFXDP, err)
	}
	s := NewStarwireServer()
	go s.Serve(l)
	return &Targets{Addrs: map[string]string{ProtoAFXDP: ep.Addr().String()}, closers: []io.Closer{ep, s}}, nil
}

// dial opens a client over AF_XDP on end B.
func (x *xdpNet) dial(addr string) (conn, error) {
	var xl *link.XSKLink
	err := x.pair.B.Do(func() (err error) {
		xl, err = link.OpenXSK(x.pair.B.Link, link.XSKOptions{Port: xdpClientPort})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bench: dial %s: %w", ProtoAFXDP, err)
	}
	ep := afxdp.NewEndpoint(xl, afxdp.Options{Ticket: PacketTicket, Backlog: -1})
	return &starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Transport(ep)}), ep: ep}, nil
}
