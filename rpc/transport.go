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

// A Withdrawer is a Conn that can take a message back before it has
// finished with it, so that a caller whose deadline passes returns at once
// instead of waiting for the peer to take the rest of its request.
type Withdrawer interface {
	// Withdraw asks the transport to stop reading m's memory and never call
	// m.Done; m must have been sent on this Conn.
	Withdraw(m *wire.Message) Withdrawal
}

// A Withdrawal says what became of a message a Withdrawer was asked for:
// wire.Withdrawal, the one type every transport answers with.
type Withdrawal = wire.Withdrawal

// The answers of Withdraw (wire's).
const (
	Kept       = wire.Kept
	Completing = wire.Completing
	Withdrawn  = wire.Withdrawn
	Unsent     = wire.Unsent
)

// A ProgressConn counts the bytes it has received and written, so that
// keepalive sees a peer busy with one long frame as alive.
type ProgressConn interface {
	Conn
	Progress() (in, out uint64)
}

// A Throttle is a Receiver that holds a connection's reader back while it
// has no room: a stream transport asks Room before it reads each frame and,
// when the answer is no, sends the answers it holds corked and calls
// WaitRoom, which returns once there is room or with an error once closed is
// closed. Reading nothing is how a stream pushes back on its peer.
type Throttle interface {
	// Room reports whether a frame of payload tensor bytes may be read.
	Room(payload uint64) bool
	WaitRoom(payload uint64, closed <-chan struct{}) error
}
