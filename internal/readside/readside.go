// Package readside is the contract between the RPC core and a stream
// transport for sharing a connection's read side: the transport's reader
// lends it to a caller waiting for the only answer due, who reads that
// answer itself, as a plain socket's user would, instead of being woken by
// the receiving goroutine (a hand-off that makes the scheduler wake a
// second thread on every call); and the core's receivers tell the reader
// whom they woke, so that it yields to them before it writes.
//
// It is the inside of package rpc and package rpc/tcp's read loop, not a
// capability a program implements, so it lives here rather than in rpc's
// API; a wrapper of a connection or of a receiver inside the module (the
// dual connection of afxdp/afxdprpc) forwards it as it forwards rpc's
// exported capabilities, and internal/seamtest checks that it does. The
// types in these signatures are package wire's, so that this package
// imports nothing of rpc.
package readside

import (
	"errors"

	"github.com/starwire/starwire/wire"
)

// A Reader is a connection (an rpc.Conn) whose read side its receiver may
// lend to a caller between two batches (see Lender).
//
// Only the goroutine holding the read side calls its methods, except
// Interrupt, ResumeReads and Fail.
type Reader interface {
	// SelfReading reports whether the read side may be lent at all.
	SelfReading() bool
	// Answers reports whether the answer to a request sent over path (as
	// an rpc.PathSender named it; the core passes "" for a plain Send)
	// arrives on the read side this connection lends. A caller whose
	// answer comes elsewhere hands the read side back instead of reading
	// it.
	Answers(path string) bool
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

// ErrUnread is Reader.Check's answer when bytes wait that nobody read.
var ErrUnread = errors.New("rpc: unread bytes on the connection")

// A Lender is a receiver that may lend the read side of its connection (a
// Reader) to the callers waiting for answers.
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

// A Waker is a receiver that says whether the frames delivered since it
// was last asked made other goroutines runnable (callers answered,
// handlers handed to workers): a stream reader yields to them before it
// sends the answers a batch held, so that their next frames leave in the
// same write.
type Waker interface {
	Woke() bool
	// Unrun reports whether goroutines it woke have not run yet.
	Unrun() bool
}
