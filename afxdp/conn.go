package afxdp

import (
	"fmt"
	"net"
	"sync/atomic"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// A Conn is one session: an ordered, reliable exchange of wire frames with
// one peer. Its methods match rpc.Conn, so package rpc can use it through a
// thin adapter (package afxdprpc).
//
// Buffer ownership: a Message's metadata and tensor memory must stay
// unchanged from Send until its Done is called, which happens once the
// peer has acknowledged every packet of it (or with the error that ended
// the session). Received frames go to the Receiver; see Endpoint for which
// goroutine runs Alloc and which runs Deliver.
type Conn struct {
	s          *session
	onReactor  bool               // the reactor calls Deliver (not BlockingReceiver)
	deliveries chan *wire.Inbound // frames for Receive's goroutine, or held until Receive is called
	r          atomic.Pointer[receiverRef]
	done       chan struct{} // closed by the reactor when the session ends
	err        error         // why; written before done is closed
	closed     atomic.Bool
	roomWait   atomic.Bool // a goroutine waits for the receiver's room (admit)
	// at is the reactor's clock as it hands frames on (monoclock.Nanos),
	// for DeliveredAt; 0 where the Receiver's Deliver runs on Receive's
	// goroutine. Written and read by whoever calls Deliver.
	at int64
}

// DeliveredAt is the time, as monoclock.Nanos reads it, at which the
// reactor handed on the frame the Receiver's Deliver now being called
// on this goroutine takes: the clock of the reactor's turn, read already,
// so that a server call's deadline needs no clock read of its own. It is
// 0 when the reactor did not deliver it (Options.BlockingReceiver, or a
// frame held until Receive after the session ended); it may be called
// only from within Deliver.
func (c *Conn) DeliveredAt() int64 { return c.at }

type receiverRef struct {
	r wire.Receiver
	t wire.Throttle // r, if it is one
}

func (c *Conn) receiver() wire.Receiver {
	if p := c.r.Load(); p != nil {
		return p.r
	}
	return nil
}

// Send queues m for the peer and returns without waiting. m.Done is called
// once every packet of m is acknowledged (nil), or with the error that
// ended the session. Safe for concurrent use; when Send returns an error,
// m.Done is not called.
func (c *Conn) Send(m *wire.Message) error {
	s := c.s
	if c.closed.Load() {
		return fmt.Errorf("afxdp: send to %v: %w", s.key.Peer, ErrClosed)
	}
	s.mu.Lock()
	if s.dead != nil {
		err := s.dead
		s.mu.Unlock()
		return fmt.Errorf("afxdp: send to %v: %w", s.key.Peer, err)
	}
	s.inq = append(s.inq, m)
	wasQueued := s.queued
	s.queued = true
	s.mu.Unlock()
	if !wasQueued {
		s.ep.enqueue(s)
	}
	return nil
}

// Receive delivers received frames to r until the session ends, and
// returns why. It is called once. r.Alloc runs on the endpoint's reactor
// (frames that arrive before Receive is called get pooled buffers), and so
// does r.Deliver unless Options.BlockingReceiver is set, in which case it
// runs on Receive's goroutine. Either way r is never called concurrently.
func (c *Conn) Receive(r wire.Receiver) error {
	t, _ := r.(wire.Throttle)
	c.r.Store(&receiverRef{r: r, t: t})
	if c.onReactor {
		// Have the reactor deliver what arrived before now.
		s := c.s
		s.mu.Lock()
		wasQueued := s.queued || s.dead != nil
		s.queued = true
		s.mu.Unlock()
		if !wasQueued {
			s.ep.enqueue(s)
		}
		<-c.done
		c.drainBacklog(r, 0) // frames held for a Receive that came after the end
		return c.err
	}
	for {
		select {
		case in := <-c.deliveries:
			c.handOver(r, in)
			if c.s.p.Shut() {
				c.s.wantReopen()
			}
		case <-c.done:
			for {
				select {
				case in := <-c.deliveries:
					c.handOver(r, in)
				default:
					return c.err
				}
			}
		}
	}
}

// Close ends the session: its peer is told, messages not yet acknowledged
// complete with ErrClosed, and Receive returns. It does not wait.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	s := c.s
	s.mu.Lock()
	if s.dead != nil {
		s.mu.Unlock()
		return nil
	}
	s.closeReq = true
	wasQueued := s.queued
	s.queued = true
	s.mu.Unlock()
	if !wasQueued {
		s.ep.enqueue(s)
	}
	return nil
}

// Done is closed when the session has ended; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the session ended, or nil while it lasts.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// LocalAddr returns the endpoint's address.
func (c *Conn) LocalAddr() net.Addr { return net.UDPAddrFromAddrPort(c.s.ep.Addr()) }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return net.UDPAddrFromAddrPort(c.s.key.Peer) }

// finish is called by the reactor, once, when the session ends.
func (c *Conn) finish(err error) {
	c.err = err
	close(c.done)
}

// upper is a Conn as its session's protocol.Upper, whose methods run under
// the endpoint's loop lock; a type of its own keeps them off Conn's API.
type upper Conn

func (u *upper) Room(n int) bool           { return (*Conn)(u).room(n) }
func (u *upper) Deliver(in *wire.Inbound)  { (*Conn)(u).deliver(in) }
func (u *upper) Receiver() wire.Receiver   { return (*Conn)(u).receiver() }
func (u *upper) Recheck()                  { u.s.wantReopen() }
func (u *upper) Admit(payload uint64) bool { return (*Conn)(u).admit(payload) }

// admit reports whether the receiver has room for a frame of payload
// tensor bytes. When it has none, a goroutine waits for room (the
// receiver says when, as it would to a stream reader) and has the reactor
// reopen the session's window; until then the peer's sender waits.
func (c *Conn) admit(payload uint64) bool {
	ref := c.r.Load()
	if ref == nil || ref.t == nil || ref.t.Room(payload) {
		return true
	}
	if c.roomWait.Swap(true) {
		return false
	}
	go func() {
		err := ref.t.WaitRoom(payload, c.done)
		c.roomWait.Store(false)
		if err == nil {
			c.s.wantReopen()
		}
	}()
	return false
}

// room reports whether n completed frames can be handed on now.
func (c *Conn) room(n int) bool {
	return (c.onReactor && c.receiver() != nil) || cap(c.deliveries)-len(c.deliveries) >= n
}

// deliver hands a completed frame on.
func (c *Conn) deliver(in *wire.Inbound) {
	if c.onReactor {
		if r := c.receiver(); r != nil {
			c.drainBacklog(r, c.s.ep.env.Now)
			c.handOver(r, in)
			return
		}
	}
	c.deliveries <- in
}

// handOver gives a frame to the receiver, and the memory it held back.
func (c *Conn) handOver(r wire.Receiver, in *wire.Inbound) {
	c.s.p.Release(protocol.ClaimOf(in))
	r.Deliver(in)
}

// drainBacklog delivers, on the reactor, frames held until Receive; at
// is the reactor's clock (DeliveredAt), 0 off the reactor.
func (c *Conn) drainBacklog(r wire.Receiver, at int64) {
	c.at = at
	// Only the loop lock's holder sends on deliveries, so none comes
	// while this looks: the common case, an empty backlog, takes no lock.
	if len(c.deliveries) == 0 {
		return
	}
	for {
		select {
		case in := <-c.deliveries:
			c.handOver(r, in)
		default:
			return
		}
	}
}

// discardAccepts drops the sessions no one accepted before the endpoint
// closed, and the frames they held for a Receive that will not come.
func discardAccepts(accepts chan *Conn) {
	for {
		select {
		case c := <-accepts:
			c.discardBacklog()
		default:
			return
		}
	}
}

// discardBacklog releases the frames held for Receive.
func (c *Conn) discardBacklog() {
	for {
		select {
		case in := <-c.deliveries:
			c.s.p.Release(protocol.ClaimOf(in))
			in.Release()
		default:
			return
		}
	}
}
