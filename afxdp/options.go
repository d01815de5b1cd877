package afxdp

import (
	"time"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// Options configure an Endpoint. The zero value gives the defaults below.
type Options struct {
	// Window is the number of packets a session keeps in flight and the
	// number of out-of-order packets it holds for reassembly; 0 means 512.
	Window int
	// RTO is the floor of the timers that back up loss detection (see
	// rack.go): a session that hears no acknowledgement for two round
	// trips, and at least RTO, resends its last packet in flight (a tail
	// loss probe); if that brings no answer either, it resends its oldest
	// after the retransmission timeout (the round-trip estimate plus four
	// deviations, at least RTO), doubling it on each expiry up to MaxRTO.
	// 0 means 4ms and 200ms.
	RTO, MaxRTO time.Duration
	// DeadAfter ends a session, completing its messages with
	// ErrPeerUnreachable, when it gets no acknowledgement for this long
	// while packets are outstanding. 0 means 5s.
	DeadAfter time.Duration
	// AckDelay is how long the acknowledgement of a packet that completed
	// a frame may wait for data to ride on (the caller's next request)
	// before it is sent alone. 0 means as long as Spin, so the reactor is
	// still polling when it is due and never sleeps owing one (a parked
	// reactor can wake milliseconds late, and its peer would retransmit);
	// negative sends it at the end of the reactor loop. An inline
	// handler's answer, sent in the same loop, carries it either way.
	// Packets of a frame still arriving are acknowledged every AckEvery,
	// and gaps at once.
	AckDelay time.Duration
	// AckEvery is how many in-order packets of a frame still arriving
	// are acknowledged together (a completed frame or a gap is
	// acknowledged at once); 0 means Window/8. It must stay well below
	// Window, or the sender stalls on its window waiting for an ACK.
	AckEvery int
	// Backlog bounds the sessions waiting in Accept; 0 means 128. A
	// negative value makes the endpoint refuse sessions (dial only).
	Backlog int
	// MaxSessions bounds the sessions peers have open with this endpoint
	// (with a Group's endpoints together), those still in their handshake
	// included, and MaxPeerSessions those from one IP address. An OPEN
	// beyond either is dropped unanswered (Stats.Refused); its dialer's
	// repeats get in once a session closes. 0 means 4096 and 256.
	// Sessions this endpoint dials are not counted.
	MaxSessions, MaxPeerSessions int
	// HandshakeTimeout is how long a session a peer opened waits for the
	// dialer's first packet after the answer to its OPEN; until then it is
	// a few dozen bytes, not yet a Conn, and then it is dropped
	// (Stats.Expired). 0 means 3s, the time Dial waits by default.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a session whose peer has sent nothing for this
	// long, completing what it held with ErrPeerUnreachable (Stats.Idle).
	// A session quiet for a quarter of it probes its peer, whose answer
	// keeps it open, so only sessions whose peer is gone or cut off close,
	// whether calls are in flight or not. 0 means 30s; negative never.
	IdleTimeout time.Duration
	// Deliveries bounds the received frames waiting for a Conn's Receive
	// loop; further frames are not acknowledged until there is room, which
	// is the session's flow control. 0 means 1024; it is never less than
	// the small frames one packet can carry packed (29 with a 1500-byte
	// MTU), since a packet's frames are taken together. Where the reactor
	// delivers (not BlockingReceiver), frames wait only for Receive to be
	// called, and at most 32 of them (or a packet's) do.
	Deliveries int
	// BlockingReceiver makes Conns deliver frames from their Receive
	// goroutine, for receivers whose Deliver may block. By default the
	// reactor calls Deliver itself, which saves two goroutine hand-offs
	// per call; Deliver must then return quickly and never wait for this
	// endpoint (an rpc inline handler sends its answer and returns).
	BlockingReceiver bool
	// Limits bound what the receive side accepts; zero means
	// wire.DefaultLimits.
	Limits wire.Limits
	// SessionMemory bounds the bytes of received frames a session holds
	// for its receiver: the frame being rebuilt, counted at the size its
	// head announces from its first packet on (its tensors' memory is
	// chosen then, to land the bytes in place), and completed frames not
	// yet handed to Deliver. EndpointMemory bounds them over all of an
	// endpoint's sessions; packets held past gaps may use what frames
	// leave of it (so all together stay within twice it). A frame that
	// does not fit waits, its session's window shut, until deliveries
	// make room; one whose head announces more than SessionMemory, as one
	// beyond Limits, is read and dropped and delivered bare with Err
	// wrapping wire.ErrTooLarge, so its call alone fails (an rpc server
	// answers ResourceExhausted): raise both for larger tensors. 0 means
	// 256 MiB and 1 GiB; EndpointMemory is never less than SessionMemory.
	SessionMemory, EndpointMemory int64
	// Spin is how long the reactor keeps polling, yielding to runnable
	// goroutines between polls, after its last work before it sleeps
	// (adaptive polling), judged by a clock read once in a few polls
	// (turn.go), so that a spell whose yields run long lasts a few polls
	// more; 0 means 20µs, negative sleeps at once. An answer
	// or the next request usually comes within it, and is caught without
	// a wake-up (afxdprpc's BenchmarkTransportProcesses).
	Spin time.Duration
	// FrameSpin is how long the reactor keeps polling instead of sleeping
	// after a packet that left a frame partly received, since the rest
	// is on its way: a reactor that slept between the packets of a large
	// tensor was woken for nearly every one, and the wake-ups, paid in
	// the sender's transmit kick, halved the tensor's rate. 0 means 50µs;
	// negative never spins.
	FrameSpin time.Duration
	// Busy makes the reactor poll without ever sleeping (a core per
	// endpoint, lowest latency), while the host has a core to spare for
	// it: a process runs at most one spinning reactor fewer than the CPUs
	// it may use, each on a CPU no other spinning reactor on the host
	// holds, and the rest poll adaptively; a spinning reactor that finds
	// goroutines waiting for a CPU sleeps as an adaptive one would (see
	// polling.go). The first reactor capped says why in the log.
	Busy bool
	// Pin locks the reactor's goroutine to its thread and the thread to
	// CPU (the *_DISABLE_PIN_CORES variables set to false). A locked
	// goroutine that yields or sleeps hands its P to another thread and
	// waits to get it back, so pin only where reactors have cores of
	// their own (on two vCPUs shared with the callers, pinning made
	// sequential calls several times slower in afxdprpc's
	// BenchmarkTransportProcesses).
	Pin bool
	// Ticket, when set, is a ticket both ends hold (configured on each):
	// the endpoint takes OPENs under it, and Dial opens sessions with it.
	// Endpoints also take OPENs under the tickets they Issue. auth.go
	// says how sessions are authenticated.
	Ticket *Ticket
	// InsecureNoAuth lets anyone who can send to the endpoint open a
	// session: it takes OPENs without a ticket, and Dial without one
	// sends them (their sessions carry no tokens). It is for benchmarks
	// and tests that want the protocol bare; by default an endpoint
	// takes only authenticated OPENs.
	InsecureNoAuth bool
	// CPU picks the CPU a pinned reactor runs on: an index into the
	// process's affinity mask, modulo its size, moved off CPUs spinning
	// reactors hold. A Group pins its endpoint i to CPU+i.
	CPU int
	// Reactors is how many reactors Open runs over AF_XDP on an interface,
	// never more than its queues (a reactor owns whole queues); 0 means
	// one. SEASTAR_CORE_NUMBER sets it (rpc/cluster's PacketReactors).
	Reactors int
}

func (o Options) withDefaults() Options {
	if o.Window <= 0 {
		o.Window = 512
	}
	if o.AckEvery <= 0 || o.AckEvery > o.Window/2 {
		o.AckEvery = max(o.Window/8, 1)
	}
	if o.Spin == 0 {
		o.Spin = 20 * time.Microsecond
	}
	switch {
	case o.AckDelay == 0 && o.Spin > 0:
		o.AckDelay = o.Spin
	case o.AckDelay < 0:
		o.AckDelay = 0
	}
	if o.FrameSpin == 0 {
		o.FrameSpin = 50 * time.Microsecond
	}
	if o.RTO <= 0 {
		o.RTO = 4 * time.Millisecond
	}
	if o.MaxRTO <= 0 {
		o.MaxRTO = 200 * time.Millisecond
	}
	o.MaxRTO = max(o.MaxRTO, o.RTO)
	if o.DeadAfter <= 0 {
		o.DeadAfter = 5 * time.Second
	}
	if o.Backlog == 0 {
		o.Backlog = 128
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 4096
	}
	if o.MaxPeerSessions <= 0 {
		o.MaxPeerSessions = 256
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 3 * time.Second
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.Deliveries <= 0 {
		o.Deliveries = 1024
	}
	if o.SessionMemory <= 0 {
		o.SessionMemory = 256 << 20
	}
	if o.EndpointMemory <= 0 {
		o.EndpointMemory = 1 << 30
	}
	o.EndpointMemory = max(o.EndpointMemory, o.SessionMemory)
	return o
}

// protocol returns what the sessions need of o, defaults applied.
func (o *Options) protocol() protocol.Config {
	return protocol.Config{
		Window: o.Window, AckEvery: o.AckEvery,
		RTO: o.RTO, MaxRTO: o.MaxRTO, DeadAfter: o.DeadAfter,
		AckDelay: o.AckDelay, IdleTimeout: o.IdleTimeout,
		Limits: o.Limits, SessionMemory: o.SessionMemory, EndpointMemory: o.EndpointMemory,
	}
}

// TaskOptions returns the defaults adjusted for reactor index of a task,
// as TensorFlow's and DeepRec's *_ENABLE_POLLING and *_DISABLE_PIN_CORES
// variables adjust them (rpc/cluster reads them: PacketPolling,
// PinPacketReactors): with pollSet, busy polls without sleeping (Busy)
// and !busy never polls (the reactor sleeps as soon as it has no work,
// leaving the cores to computation); without it the reactor keeps
// adaptive polling (Spin). pin pins the reactor to CPU index (modulo the
// CPUs).
func TaskOptions(busy, pollSet, pin bool, index int) Options {
	var o Options
	if pollSet {
		o.Busy = busy
		if !busy {
			o.Spin, o.FrameSpin = -1, -1
		}
	}
	if pin {
		o.Pin, o.CPU = true, index
	}
	return o
}

// Reactors returns how many reactors Open runs for a device with queues
// queues when asked for want (Options.Reactors): at least 1, never more
// than queues, since a reactor owns whole queues.
func Reactors(want, queues int) int {
	return max(1, min(want, queues))
}
