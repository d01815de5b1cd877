package rpc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/wire"
)

// ErrClosed is returned by Send on a connection that has been closed or has
// failed.
var ErrClosed = errors.New("rpc: connection closed")

const (
	readBufferSize = 64 << 10
	// Tensor data shorter than this is copied next to its frame's head,
	// because another iovec costs more than the copy.
	copyThreshold = 8 << 10
)

// tcpConn frames messages over a TCP connection.
//
// Writing: Send queues the message. At most one goroutine writes at a time
// (writing); it is either the caller itself, when the socket was idle and
// no other call is in flight, or the connection's reactor (scheduled). While
// Receive is delivering frames that one read returned (corked), queued
// responses wait, so that quick handlers' answers leave in one write when
// the batch is done.
type tcpConn struct {
	nc      *net.TCPConn
	br      *bufio.Reader
	lim     *wire.Limits
	reactor *reactor

	mu        sync.Mutex
	queue     []*wire.Message
	writing   bool
	scheduled bool
	corked    bool
	err       error
	// Frames sent and received. When they differ by more than one, other
	// calls are in flight and their callers are about to queue frames too,
	// so the reactor (which yields first) writes; otherwise the caller
	// writes at once, which is best for latency.
	framesOut uint64
	framesIn  atomic.Uint64

	// Owned by the goroutine that is writing.
	spare []*wire.Message
	head  []byte
	iov   [][]byte
	bufs  net.Buffers
}

// Process-wide write counters: frames per write is how well batching works.
var tcpWrites, tcpFramesOut atomic.Uint64

// TCPWriteStats returns how many writes the TCP transport has made and how
// many frames they carried, since the process started.
func TCPWriteStats() (writes, frames uint64) { return tcpWrites.Load(), tcpFramesOut.Load() }

func newTCPConn(nc *net.TCPConn, lim *wire.Limits, rs *Reactors) *tcpConn {
	nc.SetNoDelay(true)
	return &tcpConn{nc: nc, br: bufio.NewReaderSize(nc, readBufferSize), lim: lim, reactor: rs.assign()}
}

func (c *tcpConn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *tcpConn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

func (c *tcpConn) Send(m *wire.Message) error {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.queue = append(c.queue, m)
	c.framesOut++
	switch {
	case c.writing || c.scheduled || c.corked:
		c.mu.Unlock()
	case c.framesOut-c.framesIn.Load() <= 1 || c.framesIn.Load()-c.framesOut <= 1:
		c.writing = true
		c.mu.Unlock()
		c.writeQueued()
	default:
		c.scheduled = true
		c.mu.Unlock()
		c.reactor.schedule(c)
	}
	return nil
}

// flush is the reactor's entry point.
func (c *tcpConn) flush() {
	c.mu.Lock()
	c.scheduled = false
	if c.writing {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.writeQueued()
}

// writeQueued writes batches until the queue is empty. The caller has set
// c.writing.
func (c *tcpConn) writeQueued() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.corked {
			c.writing = false
			c.mu.Unlock()
			return
		}
		batch := c.queue
		c.queue = c.spare[:0]
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = c.writeBatch(batch)
		}
		for i, m := range batch {
			m.Complete(err)
			batch[i] = nil
		}
		c.spare = batch[:0]
		if err != nil {
			c.fail(err)
		}
	}
}

// writeBatch writes the frames in one writev: the heads (and small tensors)
// go into one contiguous buffer, large tensors are iovecs of their own.
func (c *tcpConn) writeBatch(batch []*wire.Message) error {
	head, iov, mark := c.head[:0], c.iov[:0], 0
	for _, m := range batch {
		var err error
		if head, err = wire.AppendHead(head, m); err != nil {
			return fmt.Errorf("rpc: encode %v frame for call %d: %w", m.Header.Kind, m.Header.CallID, err)
		}
		for i := range m.Tensors {
			data := m.Tensors[i].Data
			if len(data) < copyThreshold {
				head = append(head, data...)
				continue
			}
			iov = append(iov, head[mark:], data)
			mark = len(head)
		}
	}
	if mark < len(head) {
		iov = append(iov, head[mark:])
	}
	// WriteTo consumes the net.Buffers it is called on; a field keeps it
	// from escaping to the heap on every write.
	c.bufs = iov
	tcpWrites.Add(1)
	tcpFramesOut.Add(uint64(len(batch)))
	_, err := c.bufs.WriteTo(c.nc)
	c.bufs = nil
	clear(iov)
	c.head, c.iov = head[:0], iov[:0]
	if err != nil {
		return fmt.Errorf("rpc: write to %v: %w", c.nc.RemoteAddr(), err)
	}
	return nil
}

func (c *tcpConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was queued while corked, from the receiving goroutine.
func (c *tcpConn) uncork() {
	c.mu.Lock()
	c.corked = false
	if c.writing || c.scheduled || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.writeQueued()
}

// fail records the first error, closes the socket and completes everything
// still queued with the error.
func (c *tcpConn) fail(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	err = c.err
	// A writer completes the batch it took; what nobody took yet is
	// completed here, once.
	queue := c.queue
	c.queue = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, m := range queue {
		m.Complete(err)
	}
	return err
}

func (c *tcpConn) Close() error {
	c.fail(io.EOF)
	return nil
}

// Receive reads frames until the connection fails.
func (c *tcpConn) Receive(r wire.Receiver) error {
	var hb [wire.HeaderSize]byte
	corked, delivered := false, 0
	for {
		if delivered > 0 && c.br.Buffered() == 0 {
			// The callers this batch woke wait in this thread's run
			// queue. Yielding runs them here at once, where otherwise
			// the scheduler would wake another thread for them (on a
			// VM that wake-up costs more than a small call), and lets
			// them queue their next frames before the corked ones leave.
			runtime.Gosched()
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
		if err != nil {
			// A stream cannot be resynchronised after a bad header.
			return c.fail(err)
		}
		if !corked && c.br.Buffered() > 0 {
			c.cork()
			corked = true
		}
		in := wire.NewInbound()
		if _, err := io.ReadFull(c.br, in.Begin(&h)); err != nil {
			in.Release()
			return c.fail(fmt.Errorf("rpc: read %v frame for call %d: %w", h.Kind, h.CallID, err))
		}
		if err := c.readPayload(in, r); err != nil {
			in.Release()
			return c.fail(err)
		}
		c.framesIn.Add(1)
		delivered++
		r.Deliver(in)
	}
}

// readPayload lands the tensor bytes where r's Alloc says. A frame whose
// descriptors or destinations are bad is still read to its end, so the
// stream stays in step, and delivered with in.Err set.
func (c *tcpConn) readPayload(in *wire.Inbound, r wire.Receiver) error {
	err := in.ParseDescs()
	if err == nil {
		err = r.Alloc(in)
	}
	if err == nil {
		err = in.CheckAlloc()
	}
	if err != nil {
		in.Err = err
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
