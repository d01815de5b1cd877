package rpc

import (
	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// This file is the seam between the RPC core and its transports: every
// capability a connection, or the receiver the core hands it, may offer
// beyond Conn and wire.Receiver, for a transport or a wrapper of one to
// implement. The core finds each by a type assertion, so a wrapper of a
// Conn or of a Receiver (a connection with two paths, a hello exchange, a
// test's counter) that does not forward one turns it off without a word.
// A wrapper therefore asserts, at compile time, each one it forwards
// (var _ rpc.PathConn = (*x)(nil)), says in its doc which ones it does not
// and why, and its tests run internal/seamtest.CheckForwards, which fails
// when it drops one its inner value offers.
//
// Offered by a Conn, asked by the core:
//   - Withdrawer: take a request back when its caller gives up.
//   - ProgressConn: bytes moved, so keepalive sees a long frame as life.
//   - DeliveryClock: the time read at delivery, where a deadline counts from.
//   - PathConn: the path calls take now, for Stats.
//   - PathSender: the path each message took, per call.
//
// Offered by the core's Receivers, asked by a transport:
//   - Throttle: hold the reader back while the server has no room.
//   - PlaintextWatcher: hear of a plaintext client a TLS server refused.
//
// The stream reader's own traffic with the core (lending a connection's
// read side to the caller whose answer is due, and the receivers saying
// whom they woke) is no capability a program implements: it is
// internal/readside's, which rpc/tcp implements and wrappers inside the
// module forward.

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

// A DeliveryClock is a Conn whose Receive reads the clock as it delivers
// frames (afxdp's reactor reads it every turn): a call's deadline counts
// from that reading, 0 when there is none, instead of one of its own.
type DeliveryClock interface {
	DeliveredAt() int64
}

// A PathConn is a Conn that can carry calls over more than one path and
// says which one it uses now (Client.Stats).
type PathConn interface {
	Conn
	Path() netpath.Path
}

// A PathSender is a Conn that chooses a path per message and says which
// one it took: the core sends requests with SendPath, so that each call
// reports the path that carried it (ClientInfo.Path, metrics labels).
// SendPath is Send, with the path ("tcp", "afxdp", "udp") the message
// went over, or was queued on when it returned.
type PathSender interface {
	Conn
	SendPath(m *wire.Message) (path netpath.Path, err error)
}

// A Throttle is a Receiver that holds a connection's reader back while it
// has no room (wire.Throttle, where transports below rpc see it too): a
// stream transport asks Room before it reads each frame and, when the
// answer is no, sends the answers it holds corked and calls WaitRoom.
type Throttle = wire.Throttle

// A PlaintextWatcher is a Receiver told of a plaintext client that a
// server requiring TLS refused, before the refusal is sent.
type PlaintextWatcher interface {
	PlaintextRefused()
}

// The core's own receivers offer what they can (rpc/tcp asserts what its
// connection offers).
var (
	_ readside.Lender  = (*clientConn)(nil)
	_ readside.Waker   = (*clientConn)(nil)
	_ Throttle         = (*serverConn)(nil)
	_ readside.Waker   = (*serverConn)(nil)
	_ PlaintextWatcher = (*serverConn)(nil)
)
