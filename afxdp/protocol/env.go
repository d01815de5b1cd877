package protocol

import (
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/wire"
)

// Config is what the protocol needs of an endpoint's options, with the
// defaults already applied (afxdp.Options documents each field).
type Config struct {
	Window, AckEvery              int
	RTO, MaxRTO, DeadAfter        time.Duration
	AckDelay, IdleTimeout         time.Duration
	Limits                        wire.Limits
	SessionMemory, EndpointMemory int64
}

// ackPacketTime bounds how long an acknowledgement owed for a packet
// mid-frame waits, per packet of Config.AckEvery: the time a packet takes
// on the slowest link this is made for (1500 bytes at 1 Gb/s).
const ackPacketTime = 12 * time.Microsecond

// MaxAckDelay is the longest a peer of the same configuration holds an
// acknowledgement back: a frame's completion waits AckDelay, packets of a
// frame still arriving AckEvery packet times.
func (c *Config) MaxAckDelay() time.Duration {
	return max(c.AckDelay, time.Duration(c.AckEvery)*ackPacketTime)
}

// Tx is where sessions write the packets they transmit: TxBuffer lends
// room for one datagram (nil when none is free: the session tries again
// later), and Queue commits its first n bytes as a datagram to to. A Link
// of package afxdp is one.
type Tx interface {
	TxBuffer() []byte
	Queue(n int, to netip.AddrPort)
}

// Upper is what a session hands received frames to, the Conn of package
// afxdp. Its methods are called by the session's owner (see the package
// doc).
type Upper interface {
	// Room reports whether n completed frames can be delivered now; a
	// packet whose frames cannot is kept and the window shut (window.go).
	Room(n int) bool
	// Deliver takes a completed frame, which holds Release(ClaimOf(in))
	// bytes of the session's memory until it is handed on.
	Deliver(in *wire.Inbound)
	// Receiver returns the receiver whose Alloc gives a frame's tensors
	// their destinations, or nil for pooled buffers.
	Receiver() wire.Receiver
	// Recheck asks the owner to call Reopen once the current step is
	// done: the window shut, and room may have been made concurrently.
	Recheck()
}

// An Admitter is an Upper that may have no room for a frame's payload
// before its bytes come, as a server holding calls back has none: a
// stream transport stops reading then. A session asks Admit at each
// frame's first packet; on false it keeps the packet and shuts its
// window (window.go), the sender waits instead of being refused, and the
// Admitter has the owner call Reopen once there is room (Recheck's way).
type Admitter interface {
	Admit(payload uint64) bool
}

// Counters are what the sessions of an Env count; any goroutine may read
// them.
type Counters struct {
	Resent, Probes, Spurious, Duplicates atomic.Uint64
	Acks, Deferred, Idle                 atomic.Uint64
}

// An Env is what the sessions of one owner share: configuration, clock,
// transmit sink, receive memory and counters, and the lists of sessions
// that owe the owner a look. It belongs to the same owner as its sessions.
type Env struct {
	// Now is the current time, in nanoseconds of a monotonic clock
	// (monoclock.Nanos in afxdp), never 0. The owner sets it before each
	// step; the sessions read no other clock. Every time a session keeps
	// is on this scale, 0 standing for none.
	Now int64
	// Queued counts the packets written to the Tx since the owner last
	// reset it.
	Queued int
	Ctr    Counters
	Mem    Memory

	cfg        Config
	epoch      int64 // origin of the sessions' send times
	tx         Tx
	maxPayload int // the largest datagram the Tx carries
	dataLen    int // frame bytes per packet, before sizes are agreed
	ooo        oooPool
	spare      spares     // spare.go
	acks       []*Session // sessions owing an ACK at the end of the step

	memWaiters, memWaitersNext []*Session
}

// NewEnv returns an Env whose sessions send through tx datagrams of at
// most maxPayload bytes, timing from now on (on Now's scale).
func NewEnv(cfg Config, tx Tx, maxPayload int, now int64) *Env {
	e := &Env{Now: now, cfg: cfg, epoch: now, tx: tx, maxPayload: maxPayload, dataLen: maxPayload - HeaderLen}
	e.Mem.limit = cfg.EndpointMemory
	e.ooo.e = e
	return e
}

// Config returns the configuration the Env was made with.
func (e *Env) Config() *Config { return &e.cfg }

// DataLen is the frame bytes a packet of this Env's sessions carries at
// most.
func (e *Env) DataLen() int { return e.dataLen }

// queue commits the packet written in the Tx's buffer.
func (e *Env) queue(n int, to netip.AddrPort) {
	e.tx.Queue(n, to)
	e.Queued++
}

func (e *Env) maxAckDelay() time.Duration { return e.cfg.MaxAckDelay() }

// FlushAcks sends an ACK for every session that received data in this
// step and had no data of its own to carry the acknowledgement. The owner
// calls it at the end of every step that handled packets or reopened
// windows.
func (e *Env) FlushAcks() {
	for i, s := range e.acks {
		e.acks[i] = nil
		s.inAcks = false
		if !s.ended && (s.ackOwed || s.sackOwed || s.dsackOwed) {
			s.control(TypeAck)
		}
	}
	e.acks = e.acks[:0]
}

// RetryMemory reopens the sessions that waited for endpoint memory, once
// some was released (Mem.Freed). A session that fails to reopen is passed
// to fail with the error that ends it; it has sent RESET.
func (e *Env) RetryMemory(fail func(*Session, error)) {
	if !e.Mem.freed.Swap(false) {
		return
	}
	waiters := e.memWaiters
	e.memWaiters = e.memWaitersNext[:0]
	for i, s := range waiters {
		waiters[i] = nil
		s.memWait = false
		e.Mem.waiting.Add(-1)
		if s.ended {
			continue
		}
		if err := s.Reopen(); err != nil {
			s.control(TypeReset)
			fail(s, err)
		}
	}
	e.memWaitersNext = waiters[:0]
}
