package afxdp

import "github.com/starwire/starwire/afxdp/protocol"

// Errors callers branch on with errors.Is.
var (
	// ErrClosed is returned by operations on a closed Conn or Endpoint,
	// and completes the messages they still held.
	ErrClosed = protocol.ErrClosed
	// ErrPeerClosed completes messages still unacknowledged when the peer
	// closed the session.
	ErrPeerClosed = protocol.ErrPeerClosed
	// ErrPeerUnreachable ends a session whose packets went unacknowledged
	// for Options.DeadAfter, or whose peer was silent for IdleTimeout.
	ErrPeerUnreachable = protocol.ErrPeerUnreachable
	// ErrReset ends a session the peer does not know (it restarted, or it
	// does not accept sessions).
	ErrReset = protocol.ErrReset
	// ErrProtocol ends a session whose peer broke the protocol.
	ErrProtocol = protocol.ErrProtocol
)
