package afxdp

// The reliable packet transport, in brief.
//
// # Layers
//
//   - A Link moves datagrams, with buffers it owns and batched system
//     calls: XSKLink (AF_XDP sockets, one per queue of an interface, with
//     Ethernet/IPv4/UDP headers and checksums written in place), UDPLink (a
//     kernel UDP socket with sendmmsg/recvmmsg) and MemLink (an in-memory
//     pair with seeded loss, reordering and duplication, for tests).
//     ImpairedLink injects the same faults on any link's receive side.
//   - An Endpoint runs the protocol over one Link on one reactor goroutine
//     and turns it into sessions; a session is a Conn, which has the shape
//     of rpc.Conn (package afxdprpc adapts an Endpoint or a Group to
//     rpc.Transport). A Group runs an Endpoint per queue group
//     (OpenXSKLinks) for SEASTAR_CORE_NUMBER reactors.
//
// # Protocol
//
// A session carries frames in both directions. Each direction is a stream
// of packets numbered from 0; a frame (the head that wire.AppendHead
// encodes, then the tensors' bytes) is cut into packets of
// MaxPayload-HeaderLen bytes, the first flagged First and the last Last. A
// packet holds bytes of one frame only, but for small frames queued
// together, which share one, each whole after its length (FlagPacked): with
// many calls in flight, a packet carries a batch of them, and the kernel's
// per-packet work is paid once for the batch. Packet data is copied into the
// link's transmit buffer (a UMEM frame, for AF_XDP) straight from the
// encoded head and the tensors' own memory, and copied again from there on
// a retransmission: no other copy of a message is ever made.
//
// Reliability rests on cumulative acknowledgements: every packet carries
// the next packet number its sender expects and a credit (the window), so
// answers piggyback acknowledgements. The sender keeps at most a window of
// packets unacknowledged. The receiver keeps packets that arrive past a gap
// in a reorder buffer of one window (the only place received data is copied
// twice), flags the gap, and lists what it holds in a selective
// acknowledgement (FlagSack); a packet it receives twice it reports
// (FlagDsack), and every ACK echoes the number and copy of the data packet
// that arrived last. Loss is told from reordering by time, as RACK-TLP
// (RFC 8985) does: a packet is resent once a packet sent after it was
// delivered and a reordering window, learnt from the reordering seen, has
// passed; a tail loss probe after two quiet round trips and a
// retransmission timeout back it up, each resending one packet (rack.go).
// Packets before the expected number are duplicates and dropped, so a
// request is delivered, and runs, at most once.
//
// Reassembly lands in-order data directly in its destination: the header,
// metadata and descriptors are gathered first, then the receiver's Alloc
// chooses the tensors' buffers (an rpc Reply.Alloc can choose a variable's
// own memory), and every later packet is copied straight there. A
// frame is delivered when its Last packet lands. A message completes
// (m.Done) when the peer has acknowledged its last packet, which is when its
// memory may change.
//
// Flow control: the receiver's credit bounds what is in flight, and a
// packet whose frame cannot be taken yet (a full delivery queue, or no
// memory for what its head announces) is kept while the receiver's window
// shuts to 0 until there is room (window.go).
//
// Sessions start with OPEN, answered by an ACK carrying the acceptor's
// datagram size (RESET when the endpoint does not accept); the dialer's
// next packet, an ACK of that answer or its first data, completes the
// handshake, and only then is the session handed to Accept. CLOSE ends
// one, and a packet for an unknown session is answered with RESET. A
// session whose packets go unacknowledged for DeadAfter ends with
// ErrPeerUnreachable, completing every message it held, as does one whose
// peer answers nothing, not even probes, for IdleTimeout. Sessions peers
// open are bounded per address and in all, and half-open ones expire
// (sessions.go); the memory received frames hold is bounded per session
// and per endpoint whatever their heads announce (budget.go).
//
// # Reactor
//
// One goroutine per Endpoint owns the link, the sessions and the timers.
// Each loop receives a batch, handles it (Alloc, and Deliver, run here: a
// quick rpc handler answers within the same loop, its answer carrying the
// acknowledgement), yields once so the callers it woke queue their next
// messages, takes messages queued by Send, transmits what the windows allow
// and flushes the link once (one sendmmsg, one AF_XDP kick).
//
// Measured on two vCPUs shared by both ends of a call (BenchmarkTransport,
// BenchmarkTransportProcesses), these choices carry the figures:
//
//   - Adaptive polling: after its last work the reactor keeps polling for
//     Options.Spin (20µs), yielding to runnable goroutines between polls,
//     then parks in Go's netpoller (an epoll descriptor holding the link's
//     descriptors and an eventfd; not ppoll, since a goroutine in a
//     blocking system call keeps its P and the goroutines it just woke
//     waited up to milliseconds). The answer to a call, or the next
//     request, usually arrives within the spin: sequential calls between
//     two processes went from 29k to 114-126k calls/s, p50 from 30µs to
//     6.5µs.
//   - While a frame is partly received the reactor keeps polling
//     (Options.FrameSpin), and acknowledges its packets AckEvery at a time:
//     a receiver that slept between packets and acknowledged each batch
//     cost the sender a wake-up and the receiver a kick every 3 packets,
//     and a 16 MiB tensor moved at 0.4-0.55 GB/s instead of 0.65-0.76.
//   - The acknowledgement of a completed frame waits up to AckDelay (as
//     long as the spin) for the caller's next request to carry it, so a
//     sequential call is two packets, not three.
//   - A busy reactor (Options.Busy, the *_ENABLE_POLLING variables) yields
//     between polls too: one that never yielded left the goroutines it woke
//     waiting for the scheduler's 10ms preemption whenever every P ran a
//     reactor (48 calls/s).
//   - A sender that finds the reactor parked transmits itself, under the
//     reactor's loop lock, after yielding once so concurrent callers share
//     the kick; the reactor, parked, wakes at least every RTO to run the
//     timers those packets started.
//   - The reactor locks its OS thread only when pinned
//     (*_DISABLE_PIN_CORES=false), since a locked goroutine pays a thread
//     hand-off at every park.
//
// # AF_XDP specifics
//
// OpenXSK attaches the steering program (package xdp) through a bpf_link,
// so it detaches when the link closes or the process dies, and steers only
// IPv4/UDP to the link's port: ARP, ICMP, TCP and other ports reach the
// kernel. Veth offers copy mode only. The generic XDP hook reports every
// packet on queue 0; native mode delivers each on the queue its sender
// used, so a Group's reactors each receive their own, and a packet that
// lands on another reactor's queue is forwarded to its owner. netem cannot
// impair AF_XDP traffic (transmissions bypass the qdisc layer, XDP runs
// before it on receive): tests use the program's loss knob and
// ImpairedLink. Available says why AF_XDP cannot be used on an interface,
// wrapping ErrUnavailable, so callers fall back to UDPLink or TCP.
//
// # What to expect on veth
//
// Copy mode costs the kernel an skb allocation and several copies per
// packet, and on veth the sender's kick also runs the receiving side, while
// TCP crosses a veth in 64 KiB segments. BenchmarkTransport (one process)
// and BenchmarkTransportProcesses (server in its own process) run the raw
// limits of the path and the three transports in one command and state
// each target as a ratio of that run. On this machine, with the server in
// its own process and the machine quiet: a sequential call over AF_XDP
// takes 6.1-6.5µs at p50 (kernel UDP 11µs, TCP 33-38µs), 1.7-1.9× the
// calls/s of kernel UDP and 40-48% of a raw AF_XDP echo that waits as the
// reactors do (2.6-2.9µs); 32 calls in flight, packed about eight to a
// packet, reach 419-614k calls/s at 3.2-4.6µs of CPU a call, 0.6-1.0µs of
// it in the kernel (TCP 236-351k, kernel UDP 431-445k); a 16 MiB tensor moves at 0.63-0.72
// GB/s, 54-61% of a raw one-way stream of 1500-byte frames (0.94-1.05 GB/s
// and 52-62% with a 9000-byte MTU), against TCP's 1.9-2.4 GB/s: the sender's
// kick, which runs the receiving side too, is three quarters of its CPU. In
// one process, where both reactors and the caller share the runtime,
// sequential calls take 9.6-13µs. The case for this path is
// zero-copy NICs, where the per-packet kernel work disappears.
