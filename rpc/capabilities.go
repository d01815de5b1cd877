package rpc

import (
	"errors"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// This file is the seam between the RPC core and its transports: every
// capability a connection, or the receiver the core hands it, may offer
// beyond Conn and wire.Receiver. The core finds each by a type assertion,
// so a wrapper of a Conn or of a Receiver (a connection with two paths, a
// hello exchange, a test's counter) that does not forward one turns it off
// without a word. A wrapper therefore asserts, at compile time, each one it
// forwards (var _ rpc.SelfReader = (*x)(nil)), and says in its doc which
// ones it does not and why.
//
// Offered by a Conn, asked by the core:
//   - Withdrawer: take a request back when its caller gives up.
//   - ProgressConn: bytes moved, so keepalive sees a long frame as life.
//   - SelfReader: lend the read side to a caller for its own answer.
//   - DeliveryClock: the time read at delivery, where a deadline counts from.
//   - PathConn: the path calls take now, for Stats.
//   - PathSender: the path each message took, per call.
//
// Offered by the core's Receivers, asked by a stream transport:
//   - Throttle: hold the reader back while the server has no room.
//   - Lender: take the read side as the last answer due is delivered.
//   - Waker: say whether a delivery woke goroutines, to yield to them.
//   - PlaintextWatcher: hear of a plaintext client a TLS server refused.

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

// A SelfReader is a Conn whose read side its Receiver may lend to a caller
// between two batches (see Lender): a caller waiting for the only answer
// due reads that answer itself, as a plain socket's user would, instead of
// being woken by the receiving goroutine, a hand-off that makes the
// scheduler wake a second thread on every call.
//
// Only the goroutine holding the read side calls its methods, except
// Interrupt, ResumeReads and Fail.
type SelfReader interface {
	Conn
	// SelfReading reports whether the read side may be lent at all.
	SelfReading() bool
	// Answers reports whether the answer to a request sent over path (as
	// a PathSender named it; the core passes "" for a plain Send) arrives
	// on the read side this Conn lends. A caller whose answer comes
	// elsewhere hands the read side back instead of reading it.
	Answers(path netpath.Path) bool
	// ReadTurn reads and delivers one frame to r for a caller holding the
	// read side, waiting for it as long as it takes; first it sends the
	// answers held for a batch that has been delivered.
	ReadTurn(r wire.Receiver) error
	// ReadTurnUntil is ReadTurn for a caller whose context may end: it
	// takes nothing of a frame from the stream until the whole frame has
	// arrived, so that Interrupt can end the wait and leave the stream at
	// a frame boundary. It stops (without error) when interrupted, and
	// before a frame longer than it can hold whole, which the receiving
	// goroutine then reads.
	ReadTurnUntil(r wire.Receiver) (stopped bool, err error)
	// Interrupt makes a read in progress, and every later one, return
	// until ResumeReads; it is safe for concurrent use.
	Interrupt()
	ResumeReads()
	// WholeLimit is the longest frame ReadTurnUntil reads.
	WholeLimit() uint64
	// Leave ends a caller's turn at the read side, sending the answers
	// held for the batch delivered, and reports whether bytes read wait
	// to be delivered.
	Leave() (buffered bool)
	// Check reports, without waiting, whether the connection may carry a
	// new call read by its caller: ErrUnread when bytes arrived that
	// nobody read, the error when the peer has closed it or it failed.
	// After Interrupt, Check and ReadTurn may fail with an error wrapping
	// os.ErrDeadlineExceeded, which the core reads as the turn's end, not
	// the connection's.
	Check() error
	// Fail fails the connection with err, as its receiving goroutine
	// would, and returns the error it now reports.
	Fail(err error) error
}

// ErrUnread is SelfReader.Check's answer when bytes wait that nobody read.
var ErrUnread = errors.New("rpc: unread bytes on the connection")

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

// A Lender is a Receiver that may lend the read side of its connection
// (a SelfReader) to the callers waiting for answers.
type Lender interface {
	// MayLend reports whether delivering in, the last frame read, may
	// leave no answer due, so that the read side could go with it.
	MayLend(in *wire.Inbound) bool
	// DeliverLending delivers in and reports whether it lent the read
	// side, which it does before it wakes anyone.
	DeliverLending(in *wire.Inbound) (lent bool)
	// WaitLent returns once the read side is handed back, or with an
	// error once closed is closed.
	WaitLent(closed <-chan struct{}) error
}

// A Waker is a Receiver that says whether the frames delivered since it
// was last asked made other goroutines runnable (callers answered,
// handlers handed to workers): a stream reader yields to them before it
// sends the answers a batch held, so that their next frames leave in the
// same write.
type Waker interface {
	Woke() bool
	// Unrun reports whether goroutines it woke have not run yet.
	Unrun() bool
}

// A PlaintextWatcher is a Receiver told of a plaintext client that a
// server requiring TLS refused, before the refusal is sent.
type PlaintextWatcher interface {
	PlaintextRefused()
}

// The core's own receivers offer what they can (rpc/tcp asserts what its
// connection offers).
var (
	_ Lender           = (*clientConn)(nil)
	_ Waker            = (*clientConn)(nil)
	_ Throttle         = (*serverConn)(nil)
	_ Waker            = (*serverConn)(nil)
	_ PlaintextWatcher = (*serverConn)(nil)
)
