package protocol

import "errors"

// Errors a session ends with, which callers branch on with errors.Is.
// Package afxdp exports the same values under the same names.
var (
	// ErrClosed completes the messages a session still held when this end
	// closed it, and is returned by operations on it afterwards.
	ErrClosed = errors.New("afxdp: closed")
	// ErrPeerClosed completes messages still unacknowledged when the peer
	// closed the session.
	ErrPeerClosed = errors.New("afxdp: peer closed the session")
	// ErrPeerUnreachable ends a session whose packets went unacknowledged
	// for Config.DeadAfter, or whose peer was silent for IdleTimeout.
	ErrPeerUnreachable = errors.New("afxdp: peer unreachable")
	// ErrReset ends a session the peer does not know (it restarted, or it
	// does not accept sessions).
	ErrReset = errors.New("afxdp: session reset by peer")
	// ErrProtocol ends a session whose peer broke the protocol.
	ErrProtocol = errors.New("afxdp: protocol violation")
)
