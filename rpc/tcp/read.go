package tcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// headChunk is how much room a frame's metadata gets before its bytes
// arrive; past it, room grows with what arrives, so a header's claim alone
// allocates little.
const headChunk = 1 << 20

// Receive reads frames until the connection fails. It never writes to the
// socket and never waits for a write: answers are handed to the writer.
//
// A Receiver that is a lender may take the read side from Receive as it
// delivers the last frame of a batch (see readside.Reader); Receive then waits
// until it is handed back.
func (c *conn) Receive(r wire.Receiver) error {
	if c.tls != nil && !c.tls.ConnectionState().HandshakeComplete {
		if err := c.serverHandshake(r); err != nil {
			return c.fail(err)
		}
	}
	c.throttle, _ = r.(rpc.Throttle)
	c.wk, _ = r.(readside.Waker)
	ld, _ := r.(readside.Lender)
	for {
		c.endBatch(true)
		lent, err := c.readOne(r, ld)
		if err == nil && lent {
			err = ld.WaitLent(c.closed)
		}
		if err != nil {
			return c.fail(refusedByPeer(c, err))
		}
	}
}

// endBatch sends the answers held for a batch once its frames are all
// delivered. With yield, the reader first lets the goroutines the batch woke
// run.
func (c *conn) endBatch(yield bool) {
	if c.delivered == 0 || c.br.Buffered() > 0 {
		return
	}
	// The callers this batch woke wait in this thread's run queue.
	// Yielding runs them here at once, where otherwise the scheduler would
	// wake another thread for them (on a VM that wake-up costs more than a
	// small call), and lets them queue their next frames before the corked
	// ones leave. A yield with nobody woken only wakes an idle thread to
	// look for work. Callers that another thread took are waited for too,
	// a bounded number of yields, so that their next requests leave in the
	// same write instead of one or two more.
	if yield && (c.wk == nil || c.wk.Woke()) {
		runtime.Gosched()
		for i := 0; i < maxSettleYields && c.wk != nil && c.wk.Unrun(); i++ {
			runtime.Gosched()
		}
	}
	if c.holding {
		c.uncork()
		c.holding = false
	}
	c.delivered = 0
}

// readOne reads one frame, waiting for it as long as it takes, and
// delivers it. Whoever holds the read side calls it. With ld, the receiving
// goroutine's, the read side may be lent as the frame is delivered (lent):
// readOne then touches nothing of it after the delivery.
func (c *conn) readOne(r wire.Receiver, ld readside.Lender) (lent bool, err error) {
	hb := c.hb[:]
	if _, err := io.ReadFull(c.br, hb); err != nil {
		return false, err
	}
	h, err := wire.ParseHeader(hb, c.lim)
	if err != nil && !errors.Is(err, wire.ErrTooLarge) {
		// A stream cannot be resynchronised after a bad header.
		return false, err
	}
	if c.throttle != nil && !c.throttle.Room(h.PayloadLen) {
		if c.holding {
			c.uncork()
			c.holding = false
		}
		if err := c.throttle.WaitRoom(h.PayloadLen, c.closed); err != nil {
			return false, err
		}
	}
	switch buffered := uint64(c.br.Buffered()); {
	case c.holding && h.BodyLen() > buffered:
		// The rest of this frame is still on its way; the answers
		// held for the batch leave now rather than after it.
		c.uncork()
		c.holding = false
	case !c.holding && buffered > 0 && h.BodyLen() <= buffered:
		c.cork()
		c.holding = true
	}
	in, err := c.readFrame(&h, err, r)
	if err != nil {
		return false, err
	}
	c.framesIn.Add(1)
	c.delivered++
	if ld != nil && c.br.Buffered() == 0 && ld.MayLend(in) {
		// The batch ends with this frame, and the read side may go with
		// it: what the batch holds leaves first.
		c.endBatch(false)
		return ld.DeliverLending(in), nil
	}
	r.Deliver(in)
	return false, nil
}

// maxSettleYields bounds the yields of a reader waiting for the goroutines
// its batch woke to run (when another thread runs them, the reader's
// yields come back at once).
const maxSettleYields = 64

// readFrame reads the body of the frame with header h. A frame over the
// limits (tooLarge) is skipped and delivered bare with Err set, so only its
// call fails.
func (c *conn) readFrame(h *wire.Header, tooLarge error, r wire.Receiver) (*wire.Inbound, error) {
	in := wire.NewInbound()
	if tooLarge != nil {
		if _, err := io.CopyN(io.Discard, c.br, int64(h.BodyLen())); err != nil {
			in.Release()
			return nil, fmt.Errorf("tcp: skip %v frame for call %d: %w", h.Kind, h.CallID, err)
		}
		bare := wire.Header{Kind: h.Kind, Method: h.Method, Status: h.Status, CallID: h.CallID, Timeout: h.Timeout}
		in.Begin(&bare)
		in.Err = tooLarge
		return in, nil
	}
	if err := c.readHead(in, h); err != nil {
		in.Release()
		return nil, fmt.Errorf("tcp: read %v frame for call %d: %w", h.Kind, h.CallID, err)
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
func (c *conn) readHead(in *wire.Inbound, h *wire.Header) error {
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
func (c *conn) readPayload(in *wire.Inbound, r wire.Receiver) error {
	if in.Prepare(r) != nil {
		if _, err := io.CopyN(io.Discard, c.br, int64(in.Header.PayloadLen)); err != nil {
			return fmt.Errorf("tcp: skip payload of call %d: %w", in.Header.CallID, err)
		}
		return nil
	}
	for i := range in.Tensors {
		if _, err := io.ReadFull(c.br, in.Tensors[i].Data); err != nil {
			return fmt.Errorf("tcp: read tensor %d of call %d: %w", i, in.Header.CallID, err)
		}
	}
	return nil
}

// SelfReading implements readside.Reader: a TLS connection's reads decrypt
// records that may hold parts of several frames, so it is never lent.
func (c *conn) SelfReading() bool { return c.tls == nil }

// Answers implements readside.Reader: every answer arrives on the one stream.
func (c *conn) Answers(string) bool { return true }

// Fail implements readside.Reader.
func (c *conn) Fail(err error) error { return c.fail(err) }

func (c *conn) ReadTurn(r wire.Receiver) error {
	c.endBatch(false)
	_, err := c.readOne(r, nil)
	return err
}

func (c *conn) ReadTurnUntil(r wire.Receiver) (stopped bool, err error) {
	c.endBatch(false)
	hb, err := c.br.Peek(wire.HeaderSize)
	if err != nil {
		return interrupted(err)
	}
	if h, err := wire.ParseHeader(hb, c.lim); err == nil || errors.Is(err, wire.ErrTooLarge) {
		if h.BodyLen() > uint64(c.br.Size()-wire.HeaderSize) {
			return true, nil
		}
		if _, err := c.br.Peek(wire.HeaderSize + int(h.BodyLen())); err != nil {
			return interrupted(err)
		}
	}
	// The whole frame is buffered (or its header is bad, which fails the
	// connection): reading it does not wait.
	_, err = c.readOne(r, nil)
	return false, err
}

// interrupted sorts a read's error: the deadline interrupt sets ends a
// turn; any other error fails the connection.
func interrupted(err error) (stopped bool, _ error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true, nil
	}
	return false, err
}

// aLongTimeAgo is a read deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)

func (c *conn) Interrupt()   { c.nc.SetReadDeadline(aLongTimeAgo) }
func (c *conn) ResumeReads() { c.nc.SetReadDeadline(time.Time{}) }

func (c *conn) WholeLimit() uint64 { return uint64(c.br.Size()) }

func (c *conn) Leave() bool {
	c.endBatch(false)
	return c.br.Buffered() > 0
}

func (c *conn) Check() error {
	if c.br.Buffered() > 0 {
		return readside.ErrUnread
	}
	c.peeked, c.peekErr = 0, nil
	if err := c.raw.Read(c.peekFn); err != nil {
		return err
	}
	switch {
	case c.peekErr == unix.EAGAIN:
		return nil
	case c.peekErr != nil:
		return c.peekErr
	case c.peeked == 0:
		return io.EOF
	}
	return readside.ErrUnread
}

// peek looks, without waiting, whether a byte or the end of the stream
// waits in the socket; as a RawConn.Read function it never waits.
func (c *conn) peek(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		c.peeked = int(n)
		if errno != 0 {
			c.peekErr = errno
		}
		return true
	}
}
