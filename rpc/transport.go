package rpc

import (
	"context"
	"net"

	"github.com/starwire/starwire/wire"
)

// A Transport moves whole frames between peers. A stream transport (TCP)
// frames them with package wire; a packet transport (AF_XDP, kernel UDP)
// segments, acknowledges and retransmits them itself. Both hand received
// frames to a wire.Receiver, asking it where tensor bytes go before they
// arrive, which is what makes receiving zero-copy on every path.
//
// The types in these signatures come from package wire, so a transport can
// implement this interface without importing rpc.
type Transport interface {
	// Name identifies the transport in logs and stats ("tcp", "afxdp", ...).
	Name() string
	Dial(ctx context.Context, addr string) (Conn, error)
	Listen(addr string) (Listener, error)
}

// A Listener accepts connections for a Server.
type Listener interface {
	Accept() (Conn, error)
	Close() error
	Addr() net.Addr
}

// A Conn carries frames between two peers.
type Conn interface {
	// Send queues m and returns without waiting for the network. The
	// transport calls m.Done once it no longer reads m's metadata or tensor
	// memory: with nil once sent, or with the error that stopped it. Send is
	// safe for concurrent use; when it returns an error, m.Done is not called.
	Send(m *wire.Message) error
	// Receive delivers incoming frames to r until the connection fails or is
	// closed, and returns why. It is called once, and r is called from
	// Receive's goroutine only.
	Receive(r wire.Receiver) error
	// Close closes the connection; pending sends complete with an error.
	Close() error
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}

// ErrClosed is wrapped by the errors of a connection that has been closed or
// has failed, on every transport (TCP, afxdp's packet sessions, the dual
// connection): what Send returns then, what its pending sends complete
// with and what Receive returns. The core treats it as the peer being
// unavailable. It is wire.ErrClosed, so that transports that import no
// rpc wrap it too.
var ErrClosed = wire.ErrClosed
