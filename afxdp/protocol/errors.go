package protocol

import "github.com/starwire/starwire/wire"

// Errors a session ends with, which callers branch on with errors.Is.
// Package afxdp exports the same values under the same names. Each is
// also wire.ErrClosed (rpc.ErrClosed), which the errors of every
// transport's closed or failed connection wrap.
var (
	// ErrClosed completes the messages a session still held when this end
	// closed it, and is returned by operations on it afterwards.
	ErrClosed error = &endError{"afxdp: closed"}
	// ErrPeerClosed completes messages still unacknowledged when the peer
	// closed the session.
	ErrPeerClosed error = &endError{"afxdp: peer closed the session"}
	// ErrPeerUnreachable ends a session whose packets went unacknowledged
	// for Config.DeadAfter, or whose peer was silent for IdleTimeout.
	ErrPeerUnreachable error = &endError{"afxdp: peer unreachable"}
	// ErrReset ends a session the peer does not know (it restarted, or it
	// does not accept sessions).
	ErrReset error = &endError{"afxdp: session reset by peer"}
	// ErrProtocol ends a session whose peer broke the protocol.
	ErrProtocol error = &endError{"afxdp: protocol violation"}
)

// endError is why a session ended: itself, and wire.ErrClosed.
type endError struct{ msg string }

func (e *endError) Error() string { return e.msg }

// Is makes errors.Is(err, wire.ErrClosed) true of every session's end.
func (e *endError) Is(target error) bool { return target == wire.ErrClosed }
