// Package protocol is starwire's reliable packet protocol as a state
// machine: a Session is one end of an ordered, reliable exchange of wire
// frames with one peer over datagrams. It owns packet and message
// numbers, the send and receive windows, acknowledgements (cumulative,
// selective, delayed), packing of small frames, reassembly into the
// receiver's destinations, loss detection (RACK-TLP) and every timer.
//
// It does no I/O and starts no goroutine. Its inputs are packets
// (Session.Handle, after DecodeHeader), messages to send (Session.Send,
// Withdraw) and the current time (Env.Now, read by Session.Timers); its
// outputs are packets written to the injected Tx, completed frames handed
// to the injected Upper, message completions (wire.Message.Done) and the
// next timer deadline Timers returns. Configuration, clock and transmit
// sink come from the Env the sessions share. Package afxdp's endpoint
// drives it over a link; its tests drive it over a fake network with a
// fake clock (FuzzSessions).
//
// Ownership and concurrency: an Env and its Sessions have one owner at a
// time, and only the owner calls their methods (in afxdp, whoever holds
// the endpoint's loop lock: its reactor goroutine, or a sender standing
// in for the parked reactor). The exceptions, safe from any goroutine,
// are Session.Release, Session.Shut, Memory.Buffered, Memory.Freed and
// the Counters. Upper's methods and a message's Done are called on the
// owner's goroutine, within the call that caused them.
//
// # The protocol
//
// Each direction of a session is a stream of packets numbered from 0
// (header.go has the format). A frame, its head as wire.AppendHead encodes
// it and then its tensors' bytes, is cut into packets of the agreed size;
// small frames queued together share a packet (pack.go). Every packet
// carries a cumulative acknowledgement and a credit; the receiver holds
// packets past a gap and lists them (SACK), reports duplicates (DSACK)
// and echoes which copy of a resent packet arrived, and the sender tells
// loss from reordering by time, as RACK-TLP does, with a tail loss probe
// and a retransmission timeout behind it (rack.go). Frames are rebuilt in
// the receiver's destinations as packets come in order (reassembly.go),
// within a memory bound reserved from what their heads announce
// (budget.go); a packet whose frame cannot be taken now shuts the window
// until room is made (window.go). Invariants: a frame is delivered once,
// whole and in order, or the session ends; a message completes once,
// without error only after the peer acknowledged all of it.
//
// OPEN and its answer agree the datagram size; CLOSE and RESET end a
// session. An OPEN carries a MAC under a ticket the listener issued, which
// the owner checks (and refuses replays of) before it keeps anything for
// the session, and every packet carries its session's token for its
// direction, which the owner checks with Session.Authentic before Handle
// (auth.go has the scheme; the token is not a MAC of the data). A session
// whose packets go unacknowledged for DeadAfter, or whose peer is silent,
// probes answered by nothing, for IdleTimeout, ends with
// ErrPeerUnreachable.
//
// A step of the owner: set Env.Now; Handle the packets received (those
// Authentic); Send what was queued; Reopen sessions Upper.Recheck named and, when
// Memory.Freed, RetryMemory; then Timers and Pump on every session, and
// FlushAcks; then transmit what the Tx holds.
package protocol
