package afxdprpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
)

// A Network opens and accepts afxdp sessions: an *afxdp.Endpoint (one
// reactor) or an *afxdp.Group (a reactor per queue group). Dial opens
// sessions under the network's own ticket (afxdp.Options.Ticket),
// DialTicket under one a peer issued; Issue and Revoke hand out tickets
// for peers to open sessions with.
type Network interface {
	Dial(ctx context.Context, addr string) (*afxdp.Conn, error)
	DialTicket(ctx context.Context, addr string, t *afxdp.Ticket) (*afxdp.Conn, error)
	Issue() afxdp.Ticket
	Revoke(id uint64)
	AcceptContext(ctx context.Context) (*afxdp.Conn, error)
	Addr() netip.AddrPort
}

// Transport returns an rpc.Transport whose connections are sessions of ep:
// Dial opens a session with the endpoint at an "ip:port" address, and
// Listen returns the sessions peers open with ep. The network stays the
// caller's: closing a listener stops accepting but leaves ep and its
// sessions running.
func Transport(ep Network) rpc.Transport { return TransportOver(ep, netpath.AFXDP) }

// TransportOver is Transport whose connections name path as the path
// their calls take (rpc.PathConn): netpath.UDP for a network over
// kernel UDP, so that per-call reports say what carried the calls.
func TransportOver(ep Network, path netpath.Path) rpc.Transport {
	return &transport{ep: ep, path: path}
}

type transport struct {
	ep   Network
	path netpath.Path // what its connections say they carry calls over
}

func (t *transport) Name() string { return "afxdp" }

func (t *transport) Dial(ctx context.Context, addr string) (rpc.Conn, error) {
	c, err := t.ep.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &packetConn{c, t.path}, nil
}

// packetConn is a session as an rpc.Conn, which rpc's client can ask to
// take a request back (rpc.Withdrawer: afxdp.Conn.Withdraw answers with
// wire.Withdrawal, rpc's type) and rpc's server to read the clock of a
// delivery (rpc.DeliveryClock); it names its path (rpc.PathConn). It
// offers no readside.Reader: the session's reactor delivers every frame.
type packetConn struct {
	*afxdp.Conn
	path netpath.Path
}

var (
	_ rpc.Withdrawer    = (*packetConn)(nil)
	_ rpc.DeliveryClock = (*packetConn)(nil)
	_ rpc.PathConn      = (*packetConn)(nil)
)

// Path implements rpc.PathConn.
func (c *packetConn) Path() netpath.Path { return c.path }

// Listen accepts the endpoint's sessions. addr must be empty or the
// endpoint's own address, since the endpoint is already bound.
func (t *transport) Listen(addr string) (rpc.Listener, error) {
	if addr != "" && addr != t.ep.Addr().String() {
		return nil, fmt.Errorf("afxdprpc: listen %s: the endpoint is bound to %v", addr, t.ep.Addr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{ep: t.ep, path: t.path, ctx: ctx, cancel: cancel}, nil
}

type listener struct {
	ep     Network
	path   netpath.Path
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *listener) Accept() (rpc.Conn, error) {
	c, err := l.ep.AcceptContext(l.ctx)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return nil, fmt.Errorf("afxdprpc: accept on %v: %w", l.ep.Addr(), net.ErrClosed)
		}
		return nil, err
	}
	return &packetConn{c, l.path}, nil
}

func (l *listener) Close() error {
	l.cancel()
	return nil
}

func (l *listener) Addr() net.Addr { return net.UDPAddrFromAddrPort(l.ep.Addr()) }
