// Package afxdp runs starwire's packet protocol: endpoints that run the
// reliable packet protocol (package protocol) over a link (package link:
// AF_XDP sockets, a kernel UDP socket, an in-memory pair), and hand its
// sessions out as Conns, which package afxdprpc adapts to rpc.Transport.
//
// # Glossary
//
// One name per thing, in code, flags, metrics labels and documents:
//
//   - afxdp (netpath.AFXDP, AF_XDP in prose): the path of calls carried by
//     the packet protocol over AF_XDP sockets, bypassing the kernel's
//     network stack. Flags: --afxdp (auto, on, off), --afxdp_iface,
//     --afxdp_path; metrics label path="afxdp". Older documents call it
//     the bypass, the kernel-bypass path or the packet path; the policy
//     words "bypass" and "always" are read as aliases of "afxdp".
//   - udp (netpath.UDP): the same protocol over a kernel UDP socket, where
//     AF_XDP is unavailable (Open's fallback) or chosen (--transport udp).
//   - tcp (netpath.TCP): the stream path, package rpc/tcp; the policy
//     word "never", an older name, is read as an alias of "tcp".
//   - packet protocol: this package's reliable protocol (package protocol),
//     which both afxdp and udp run; a packet session is one of its
//     sessions (a Conn), and the packet path, where a document still says
//     so, is whichever of afxdp or udp a packet session runs over. A
//     packet transport (as opposed to a stream transport such as rpc/tcp)
//     is an rpc.Transport over the protocol: afxdprpc.Transport.
//   - dual connection (afxdprpc.Dual, the transport named "dual"): a
//     connection that starts on tcp and, once both ends advertise a packet
//     endpoint, carries each call whole over tcp or the packet session, as
//     the path policy (netpath.Policy: --afxdp_path, STARWIRE_AFXDP_PATH)
//     chooses. It is a transport, not a path: each call reports the path
//     that carried it.
//
// # Pieces
//
//   - An Endpoint drives the protocol over one Link on one reactor
//     goroutine: it receives batches, hands each packet to its session,
//     lets sessions transmit what their windows allow, and flushes the link
//     once per loop (one sendmmsg, one AF_XDP kick). It keeps the session
//     table: OPENs make half-open entries, bounded per peer address and in
//     all, that become sessions only when the dialer's next packet
//     completes the handshake (sessions.go). It takes only OPENs
//     authenticated under a Ticket it holds (Options.Ticket, Issue), and
//     drops, before its session sees them, packets without their
//     session's token (auth.go).
//   - A Conn is one session, with the shape of rpc.Conn: Send, Receive,
//     Withdraw, Close.
//   - A Group runs an Endpoint per queue group of one interface
//     (link.OpenXSKLinks, Reactors); a packet that arrives on another
//     reactor's queue is forwarded to the session's owner.
//   - Open chooses the path for an interface: AF_XDP where Available says
//     it can be used, kernel UDP otherwise, and says why (Opened).
//
// # Ownership and concurrency
//
// Everything an Endpoint's sessions hold (protocol state, the session
// table, the link's receive side) belongs to whoever holds the endpoint's
// loop lock: the reactor goroutine, or a goroutine that queued work while
// the reactor was parked and runs one step in its place (see Endpoint).
// Conn's methods are safe for concurrent use; they queue work under the
// session's mutex and wake the reactor. Receiver.Alloc, and Deliver unless
// Options.BlockingReceiver, run under the loop lock, never concurrently.
//
// # Buffers
//
// A Message's metadata and tensor memory must stay unchanged from Send
// until its Done is called: once the peer acknowledged every packet of
// it, or with the error that ended the session (Withdraw takes it back
// early). Packet data is copied from the encoded head and the tensors'
// own memory straight into the link's transmit buffer, and from there
// again on a retransmission; received data lands in the destinations the
// receiver's Alloc chose, except packets held past a gap, which are
// copied once. The memory received frames hold is bounded per session
// and per endpoint whatever their heads announce (Options.SessionMemory).
//
// # Errors
//
// Sessions end with ErrClosed, ErrPeerClosed, ErrPeerUnreachable, ErrReset
// or ErrProtocol, and every message they held completes with that error.
// Available and Open report why AF_XDP cannot be used, wrapping
// link.ErrUnavailable, so callers fall back to kernel UDP or TCP.
//
// The defaults (polling, acknowledgement pacing, packing, the socket layer)
// are what afxdprpc's BenchmarkTransport and BenchmarkTransportProcesses
// measured best, against the raw socket limits of BenchmarkRawEcho.
package afxdp
