// Package afxdprpc lets package rpc run over afxdp's packet transport:
// Transport adapts an afxdp.Endpoint or Group to rpc.Transport, and Dual
// runs a connection over two paths at once, starting on a stream transport
// (TCP) and opening a packet session too when both ends have AF_XDP. It
// exists so that neither rpc nor afxdp imports the other.
//
// A dual connection offers the core what a plain TCP connection does on
// its TCP half (the lent read side of internal/readside, and the
// receiver's readside.Lender and readside.Waker passed through to the TCP
// reader), so a call that stays on TCP costs what it costs there, and
// reports the path each request took
// (rpc.PathSender), which is what ClientInfo.Path, the metrics' path
// labels and train's summary count.
//
// # Which path a call takes
//
// Once a dual connection has both paths, each call goes whole over one of
// them, chosen as it is sent (DualOptions.Policy): its request, and a
// cancel of it, take that path, and the server answers on it, so a call
// keeps its deadline and its order relative to the calls its caller made
// before and after it. Other frames (pings) take the packet path.
//
// The size that decides is the larger of the request and the answer
// expected: the size of the answers last seen for the same method and
// request size class (a RecvTensor request is small, its answer a
// tensor). Under PathAuto, the default, the connection times its own calls:
// per power-of-two size class and path, the least of the last 8 round trips
// divided by the calls the path had in flight, which is a lone call's
// latency and a busy path's time per completed call. Every class starts
// on TCP; one below 64 KiB alternates until both paths are measured, a
// larger one measures AF_XDP by probes only. Each then sends its calls
// over TCP unless AF_XDP costs less by the margin the CPU it adds asks
// (its reactors poll after each call, a cost to the job's other work that
// no latency shows; CPU the machine had idle is not charged), and every
// 16 to 1024 calls a burst over the other path, to keep that estimate
// current (more often while the probes look better, less while they
// confirm the choice); a class changes path after two bursts in a row
// beat it. With STARWIRE_CHOOSER_TRACE=1 each connection writes one line
// to stderr per probe burst, judgement, path switch and CPU window: the
// class, path, calls, time per call, CPU ratio, margin and decision. Stats reports each path's calls and bytes and the
// crossover, the smallest size now sent over TCP. PathThreshold fixes the
// crossover, PathAFXDP and PathTCPOnly send everything one way.
//
// # Who may open the packet session
//
// The packet session opens under a ticket (afxdp.Ticket) the listener
// issues for each TCP connection and hands out in its answer to the
// client's hello, so only a peer that completed the TCP connection, and
// its TLS handshake when the stream transport has TLS, can open it; the
// ticket is revoked when the TCP connection ends. The hello is as secret
// as the TCP connection: without TLS, whoever reads the connection can
// open the session too. With DualOptions.Packet there is no hello, and the
// sessions open under the networks' own ticket (afxdp.Options.Ticket).
//
// Nothing in the rule assumes which path carries bulk faster. Over veth in
// copy mode the kernel copies every AF_XDP packet and TCP moves 64 KiB
// segments with offloads, so TCP measures faster above some tens of
// kilobytes and the crossover lands there; small calls, whose cost is
// wake-ups and system calls, measure faster over AF_XDP. A NIC in
// zero-copy mode removes the copies and the classes of large calls measure
// faster over AF_XDP: the probes measure it within a few hundred calls
// (TestChooserAuto's last step), and bulk moves to AF_XDP and stays, with
// the crossover reported as -1 (none).
package afxdprpc
