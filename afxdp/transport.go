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
// MaxPayload-HeaderLen bytes, the first flagged First and the last Last, a
// packet never holding bytes of two frames. Packet data is copied into the
// link's transmit buffer (a UMEM frame, for AF_XDP) straight from the
// encoded head and the tensors' own memory, and copied again from there on
// a retransmission: no other copy of a message is ever made.
//
// Reliability is go-back-N with cumulative acknowledgements: every packet
// carries the next packet number its sender expects and a credit (the
// window), so answers piggyback acknowledgements. The sender keeps at most a
// window of packets unacknowledged; when the oldest has waited RTO
// (milliseconds, doubling on each expiry up to MaxRTO), it sends the window
// again from there. Because reordering costs a whole window under strict
// go-back-N, the receiver keeps packets that arrive past a gap in a reorder
// buffer of one window (the only place received data is copied twice) and
// flags the gap; the sender resends just the missing packet after three
// duplicate acknowledgements, or at once when an acknowledgement moves but
// still reports a gap, as TCP's fast retransmit does. Packets before the
// expected number are duplicates and dropped, so a request is delivered,
// and runs, at most once.
//
// Reassembly lands in-order data directly in its destination: the header,
// metadata and descriptors are gathered first, then the receiver's Alloc
// chooses the tensors' buffers (an rpc Reply.Alloc can choose a variable's
// own memory), and every later packet is copied to Inbound.PayloadDest. A
// frame is delivered when its Last packet lands. A message completes
// (m.Done) when the peer has acknowledged its last packet, which is when its
// memory may change.
//
// Flow control: the receiver's credit bounds what is in flight, and with
// Options.BlockingReceiver a frame whose delivery queue is full is not
// acknowledged, so the sender backs off on its timeout until Receive
// catches up.
//
// Sessions start with OPEN, answered by an ACK (RESET when the endpoint does
// not accept); CLOSE ends one, and a packet for an unknown session is
// answered with RESET. A session whose packets go unacknowledged for
// DeadAfter ends with ErrPeerUnreachable, completing every message it held.
//
// # Reactor
//
// One goroutine per Endpoint owns the link, the sessions and the timers.
// Each loop receives a batch, handles it (Alloc, and Deliver, run here: a
// quick rpc handler answers within the same loop, its answer carrying the
// acknowledgement), takes messages queued by Send, transmits what the
// windows allow and flushes the link once (one sendmmsg, one AF_XDP kick).
//
// Measured on two vCPUs shared by both ends of a call, three choices
// differ from the obvious design:
//
//   - The reactor parks in Go's netpoller (an epoll descriptor holding the
//     link's descriptors and an eventfd), not in ppoll: a goroutine in a
//     blocking system call keeps its P until the runtime's monitor takes it
//     back, and the goroutines it just woke waited up to milliseconds.
//   - A sender that finds the reactor parked transmits itself, under the
//     reactor's loop lock, after yielding once so concurrent callers share
//     the kick; the reactor, parked, wakes at least every RTO to run the
//     timers those packets started. This took a sequential call from 30µs
//     to 17µs and 32 callers from 78k to 129k calls/s.
//   - Spinning is off by default (Options.Spin, Options.Busy, or the
//     *_ENABLE_POLLING variables turn it on): a spinning reactor holds a P
//     and keeps the runtime from polling the network for the other end's
//     parked reactor, which made the mean round trip 77µs instead of 30µs.
//     The reactor locks its OS thread only when pinned
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
// Copy mode costs the kernel an skb allocation and two copies per packet,
// while TCP crosses a veth in 64 KiB segments. Measured with both ends on
// two shared vCPUs (BenchmarkTransport, BenchmarkTransportProcesses), the
// packet transport over AF_XDP matches TCP on sequential calls in one
// process (p50 15-22µs both), trails it with 32 calls in flight, and moves
// a 16 MiB tensor at 0.1-0.6 GB/s against TCP's 0.7-1.9 GB/s (a 9000-byte
// MTU roughly doubles AF_XDP's figure). That is the ceiling the raw ring
// layer itself reaches with 1500-byte frames (see doc.go: up to 420 MB/s),
// so the protocol costs little on top of copy mode. With the server in its
// own process, sequential calls over AF_XDP and TCP both take 32-45µs at
// p50 on this machine. Kernel UDP is mostly slower than AF_XDP. The case
// for this path is zero-copy NICs, where the per-packet kernel work
// disappears.
