package tcp

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/writecount"
)

// flush is the reactor's entry point.
func (c *conn) flush() {
	c.mu.Lock()
	c.scheduled = false
	if c.writing {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.write(true)
}

// writeNow writes one batch for a caller or the reader, which have their
// own work to go back to: what other callers queue meanwhile is left to the
// reactor.
func (c *conn) writeNow() { c.write(false) }

// write writes queued frames without waiting for the socket, and at most
// tryBudget bytes of a batch. Its caller holds the write side; write gives
// it up when done, or hands it to a drainer goroutine when the socket is
// full or the batch is long, or, unless all, to the reactor when more
// frames are queued after the first batch.
func (c *conn) write(all bool) {
	for first := true; ; first = false {
		if !first && !all {
			c.handOff()
			return
		}
		if !c.takeBatch() {
			return
		}
		err := c.raw.Write(c.tryFn)
		if err == nil {
			err = c.writeErr
		}
		if err == errHeld {
			if c.park() {
				return
			}
			err = nil
		}
		if err != nil {
			c.abortBatch(err)
			return
		}
		if c.pending() {
			go c.drainFn()
			return
		}
		c.completeBatch(nil)
	}
}

// errHeld says that the batch's next bytes are a withdrawn message's rest
// that its withdrawer is copying (see batch).
var errHeld = errors.New("tcp: next bytes held for a withdrawn message's copy")

// park gives up the write side while the batch is blocked on a held rest:
// the writer, which may be the connection's reader, never waits for a
// copy; the withdrawer has the reactor go on once the copy is in place
// (placeRest). It reports false when that happened already.
func (c *conn) park() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out.skipDropped()
	if !c.out.blocked() || (c.shim != nil && c.shim.pending() > 0) {
		return false
	}
	c.writing = false
	return true
}

// handOff gives up the write side, scheduling the reactor for the frames
// queued meanwhile.
func (c *conn) handOff() {
	c.mu.Lock()
	c.writing = false
	if len(c.queue) == 0 || c.corked || c.err != nil || c.scheduled {
		c.mu.Unlock()
		return
	}
	c.scheduled = true
	c.mu.Unlock()
	c.reactor.schedule(c)
}

// drain holds the write side while the socket is full: it waits for room,
// writes, and goes on with the queue until it is empty. It fails the
// connection when the peer reads nothing for the stall timeout.
func (c *conn) drain() {
	defer c.nc.SetWriteDeadline(time.Time{})
	for {
		if c.stall > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(c.stall))
		}
		err := c.raw.Write(c.blockFn)
		if err == nil {
			err = c.writeErr
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w: nothing written for %v", ErrStalled, c.stall)
		}
		if err == errHeld {
			if c.park() {
				return
			}
			continue
		}
		if err != nil {
			c.abortBatch(err)
			return
		}
		if c.pending() {
			continue
		}
		c.completeBatch(nil)
		if !c.takeBatch() {
			return
		}
	}
}

// takeBatch lays out the queued frames as the batch to write, unless one is
// still being written. It gives up the write side and returns false when
// there is nothing to write, the answers are corked or the connection failed.
func (c *conn) takeBatch() bool {
	c.mu.Lock()
	if c.pending() {
		c.mu.Unlock()
		return true
	}
	if len(c.queue) == 0 || c.corked || c.err != nil || (c.tls != nil && !c.secured) {
		c.writing = false
		c.mu.Unlock()
		return false
	}
	msgs := c.queue
	c.queue, c.spare = c.spare[:0], nil
	// Laid out without the lock, so that callers queueing meanwhile do not
	// wait; a Withdraw waits for it as for a write.
	c.out.msgs = msgs
	c.inSyscall = true
	c.mu.Unlock()
	c.out.build()
	c.mu.Lock()
	c.inSyscall = false
	if c.waiters > 0 {
		c.written.Broadcast()
	}
	failed := c.out.failed
	c.out.failed = nil
	c.mu.Unlock()
	for _, f := range failed {
		f.m.Complete(f.err)
	}
	writecount.Add(len(msgs))
	return true
}

// tryBudget bounds what one non-blocking turn writes: a caller, the reader
// or a reactor that wrote a batch of large tensors whole would keep its own
// work (a caller its deadline) waiting behind other calls' bytes.
const tryBudget = 1 << 20

// tryWrite writes the batch until it is done, the socket is full or
// tryBudget bytes are out. As a RawConn.Write function it never waits.
func (c *conn) tryWrite(fd uintptr) bool {
	c.writeErr = nil
	for sent := 0; c.pending() && sent < tryBudget; {
		n, full, err := c.writeOnce(fd)
		if err == unix.EAGAIN {
			return true
		}
		if err != nil || n < full {
			c.writeErr = err
			return true
		}
		sent += n
	}
	return true
}

// blockingWrite is tryWrite for the drainer: on a full socket it asks to
// wait for room, unless it has written something since it was called, so
// that every wait starts a new stall timeout.
func (c *conn) blockingWrite(fd uintptr) bool {
	wrote := false
	c.writeErr = nil
	for c.pending() {
		n, full, err := c.writeOnce(fd)
		switch {
		case err == unix.EAGAIN:
			return wrote
		case err != nil:
			c.writeErr = err
			return true
		}
		wrote = wrote || n > 0
		if n < full {
			return true
		}
	}
	return true
}

// writeOnce makes one writev of the batch's next parts. full is what it
// asked to write; a write of less means the socket is full, and so does
// unix.EAGAIN, returned unwrapped. errHeld means that the batch is
// blocked; nothing asked and no error, that the parts left were dropped.
func (c *conn) writeOnce(fd uintptr) (n, full int, err error) {
	if c.tls != nil {
		return c.writeTLSOnce(fd)
	}
	c.mu.Lock()
	vecs := c.out.vectors()
	if len(vecs) == 0 {
		c.out.skipDropped()
		blocked := c.out.blocked()
		c.mu.Unlock()
		if blocked {
			return 0, 0, errHeld
		}
		return 0, 0, nil // the rest was dropped
	}
	for i := range vecs {
		full += int(vecs[i].Len)
	}
	c.inSyscall = true
	c.mu.Unlock()
	n, err = writev(fd, vecs)
	c.mu.Lock()
	c.inSyscall = false
	c.out.advance(n)
	if c.waiters > 0 {
		c.written.Broadcast()
	}
	c.mu.Unlock()
	c.bytesOut.Add(uint64(n))
	if err != nil && err != unix.EAGAIN {
		err = fmt.Errorf("tcp: write to %v: %w", c.nc.RemoteAddr(), err)
	}
	return n, full, err
}

// abortBatch completes the batch with err and fails the connection, whose
// stream now holds part of a frame.
func (c *conn) abortBatch(err error) {
	c.completeBatch(err)
	c.fail(err)
	c.mu.Lock()
	c.writing = false
	c.mu.Unlock()
}

func (c *conn) completeBatch(err error) {
	c.mu.Lock()
	msgs := c.out.msgs
	c.out.reset()
	c.mu.Unlock()
	for i, m := range msgs {
		if m != nil {
			m.Complete(err)
			msgs[i] = nil
		}
	}
	c.mu.Lock()
	c.spare = msgs[:0]
	c.mu.Unlock()
}
