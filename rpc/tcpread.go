package rpc

import (
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/starwire/starwire/wire"
)

// headChunk is how much room a frame's metadata gets before its bytes
// arrive; past it, room grows with what arrives, so a header's claim alone
// allocates little.
const headChunk = 1 << 20

// Receive reads frames until the connection fails. It never writes to the
// socket and never waits for a write: answers are handed to the writer.
func (c *tcpConn) Receive(r wire.Receiver) error {
	if c.tls != nil && !c.tls.ConnectionState().HandshakeComplete {
		if err := c.serverHandshake(); err != nil {
			return c.fail(err)
		}
	}
	var hb [wire.HeaderSize]byte
	throttle, _ := r.(Throttle)
	wk, _ := r.(waker)
	corked, delivered := false, 0
	for {
		if delivered > 0 && c.br.Buffered() == 0 {
			// The callers this batch woke wait in this thread's run
			// queue. Yielding runs them here at once, where otherwise
			// the scheduler would wake another thread for them (on a
			// VM that wake-up costs more than a small call), and lets
			// them queue their next frames before the corked ones leave.
			// A yield with nobody woken only wakes an idle thread to
			// look for work.
			if wk == nil || wk.woke() {
				runtime.Gosched()
			}
			if corked {
				c.uncork()
				corked = false
			}
			delivered = 0
		}
		if _, err := io.ReadFull(c.br, hb[:]); err != nil {
			return c.fail(err)
		}
		h, err := wire.ParseHeader(hb[:], c.lim)
		if err != nil && !errors.Is(err, wire.ErrTooLarge) {
			// A stream cannot be resynchronised after a bad header.
			return c.fail(err)
		}
		if throttle != nil && !throttle.Room(h.PayloadLen) {
			if corked {
				c.uncork()
				corked = false
			}
			if err := throttle.WaitRoom(h.PayloadLen, c.closed); err != nil {
				return c.fail(err)
			}
		}
		switch buffered := uint64(c.br.Buffered()); {
		case corked && h.BodyLen() > buffered:
			// The rest of this frame is still on its way; the answers
			// held for the batch leave now rather than after it.
			c.uncork()
			corked = false
		case !corked && buffered > 0 && h.BodyLen() <= buffered:
			c.cork()
			corked = true
		}
		in, err := c.readFrame(&h, err, r)
		if err != nil {
			return c.fail(err)
		}
		c.framesIn.Add(1)
		delivered++
		r.Deliver(in)
	}
}

// A waker is a Receiver that says whether the frames delivered since it was
// last asked made other goroutines runnable (callers answered, handlers
// handed to workers).
type waker interface{ woke() bool }

// readFrame reads the body of the frame with header h. A frame over the
// limits (tooLarge) is skipped and delivered bare with Err set, so only its
// call fails.
func (c *tcpConn) readFrame(h *wire.Header, tooLarge error, r wire.Receiver) (*wire.Inbound, error) {
	in := wire.NewInbound()
	if tooLarge != nil {
		if _, err := io.CopyN(io.Discard, c.br, int64(h.BodyLen())); err != nil {
			in.Release()
			return nil, fmt.Errorf("rpc: skip %v frame for call %d: %w", h.Kind, h.CallID, err)
		}
		bare := wire.Header{Kind: h.Kind, Method: h.Method, Status: h.Status, CallID: h.CallID, Timeout: h.Timeout}
		in.Begin(&bare)
		in.Err = tooLarge
		return in, nil
	}
	if err := c.readHead(in, h); err != nil {
		in.Release()
		return nil, fmt.Errorf("rpc: read %v frame for call %d: %w", h.Kind, h.CallID, err)
	}
	if err := c.readPayload(in, r); err != nil {
		in.Release()
		return nil, err
	}
	return in, nil
}

// readHead reads the frame's metadata and descriptors. Up to headChunk
// bytes land in place; a longer head is read into room that doubles as it
// fills, then copied.
func (c *tcpConn) readHead(in *wire.Inbound, h *wire.Header) error {
	n := int(h.MetaLen) + int(h.DescLen)
	if n <= headChunk {
		_, err := io.ReadFull(c.br, in.Begin(h))
		return err
	}
	buf := wire.NewBuffer(headChunk)
	defer func() { buf.Release() }()
	for got := 0; got < n; {
		if got == buf.Len() {
			bigger := wire.NewBuffer(min(2*got, n))
			copy(bigger.Bytes(), buf.Bytes())
			buf.Release()
			buf = bigger
		}
		k, err := io.ReadFull(c.br, buf.Bytes()[got:])
		got += k
		if err != nil {
			return err
		}
	}
	copy(in.Begin(h), buf.Bytes())
	return nil
}

// readPayload lands the tensor bytes where r's Alloc says. A frame whose
// descriptors or destinations are bad is still read to its end, so the
// stream stays in step, and delivered with in.Err set.
func (c *tcpConn) readPayload(in *wire.Inbound, r wire.Receiver) error {
	if in.Prepare(r) != nil {
		if _, err := io.CopyN(io.Discard, c.br, int64(in.Header.PayloadLen)); err != nil {
			return fmt.Errorf("rpc: skip payload of call %d: %w", in.Header.CallID, err)
		}
		return nil
	}
	for i := range in.Tensors {
		if _, err := io.ReadFull(c.br, in.Tensors[i].Data); err != nil {
			return fmt.Errorf("rpc: read tensor %d of call %d: %w", i, in.Header.CallID, err)
		}
	}
	return nil
}
