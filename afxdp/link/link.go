package link

import (
	"net/netip"
	"time"
)

// A Link moves datagrams between this host and peers. It is driven by one
// goroutine at a time, the reactor that owns it or a sender holding the
// reactor's loop lock; Wake may be called from any goroutine, and the
// sending methods (TxBuffer, Queue, Flush) may run on a sender while the
// reactor is in Wait, so Wait must not touch their state.
//
// Buffers belong to the link, so moving a packet allocates nothing. Sending
// is three steps: TxBuffer lends room for one packet, Queue commits it with
// its length and destination, and Flush hands every queued packet to the
// network in as few system calls as the link can (sendmmsg, one AF_XDP kick).
// Receiving fills a caller's slice with views of up to len(pkts) datagrams
// that stay valid until the next Receive.
type Link interface {
	// MaxPayload is the largest datagram, in bytes, the link carries.
	MaxPayload() int
	// TxBuffer returns room for one datagram, MaxPayload bytes long, or
	// nil when every transmit buffer is in use (Flush frees them). The
	// room is the caller's until Queue or the next TxBuffer.
	TxBuffer() []byte
	// Queue commits the first n bytes of the room TxBuffer returned as a
	// datagram to to. It may be held until Flush.
	Queue(n int, to netip.AddrPort)
	// Flush sends every queued datagram.
	Flush() error
	// Receive fills pkts with received datagrams and returns how many,
	// without waiting. Their Data stay valid until the next Receive.
	Receive(pkts []Datagram) (int, error)
	// Wait sleeps until a datagram may be ready, Wake is called, or d
	// passes (d < 0: no limit).
	Wait(d time.Duration) error
	// Wake interrupts a Wait in progress, or makes the next one return at
	// once. Safe for concurrent use.
	Wake()
	// LocalAddr is the address peers send to.
	LocalAddr() netip.AddrPort
	// Close releases the link; Wait returns ErrLinkClosed afterwards.
	Close() error
}

// Datagram is one received packet: a view of the link's buffer and the
// address it came from.
type Datagram struct {
	Data []byte
	From netip.AddrPort
}
