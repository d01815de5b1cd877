package rpc

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/wire"
)

// A batch is the frames one writer is putting on the socket: their heads
// (and small tensors) copied into one buffer, large tensors as parts of
// their own that point into the senders' memory, written with as few
// writev calls as the socket allows.
//
// The writer that holds the connection's write side owns a batch. The
// connection's mutex guards msgs, parts and owner as well, because Withdraw
// may repoint a message's parts at a copy between two writes (never during
// one: see tcpConn.inSyscall).
type batch struct {
	msgs   []*wire.Message // completed once written; nil once withdrawn
	failed []batchFailure  // messages that could not be encoded
	head   []byte
	parts  [][]byte // left to write: parts[next:]
	owner  []int32  // owner[i] is the index in msgs whose memory parts[i] is, or -1
	next   int
	vecs   []unix.Iovec
	copies []*wire.Buffer // private copies of withdrawn messages' parts
}

type batchFailure struct {
	m   *wire.Message
	err error
}

// build lays out b.msgs, which the batch has taken.
func (b *batch) build() {
	head, mark := b.head[:0], 0
	for i, m := range b.msgs {
		start := len(head)
		var err error
		if head, err = wire.AppendHead(head, m); err != nil {
			b.failed = append(b.failed, batchFailure{m, fmt.Errorf("rpc: encode %v frame for call %d: %w", m.Header.Kind, m.Header.CallID, err)})
			b.msgs[i] = nil
			head = head[:start]
			continue
		}
		for j := range m.Tensors {
			data := m.Tensors[j].Data
			if len(data) < copyThreshold {
				head = append(head, data...)
				continue
			}
			b.add(head[mark:], -1)
			b.add(data, int32(i))
			mark = len(head)
		}
	}
	if mark < len(head) {
		b.add(head[mark:], -1)
	}
	b.head = head
}

func (b *batch) add(p []byte, owner int32) {
	if len(p) == 0 {
		return
	}
	b.parts = append(b.parts, p)
	b.owner = append(b.owner, owner)
}

// pending reports whether bytes are left to write.
func (b *batch) pending() bool { return b.next < len(b.parts) }

// maxWritev bounds the bytes one writev is given. On loopback the kernel
// goes on copying while the peer reads, so one writev of a batch of large
// tensors is unbounded in time, and a Withdraw waits for the writev in
// progress to return.
const maxWritev = 2 << 20

// vectors returns the next parts to write as iovecs, at most maxIovecs of
// them and maxWritev bytes.
func (b *batch) vectors() []unix.Iovec {
	n := min(len(b.parts)-b.next, maxIovecs)
	if cap(b.vecs) < n {
		b.vecs = make([]unix.Iovec, n)
	}
	vecs := b.vecs[:n]
	size := 0
	for i := range vecs {
		p := b.parts[b.next+i]
		if size+len(p) >= maxWritev {
			setIovec(&vecs[i], p[:maxWritev-size])
			return vecs[:i+1]
		}
		setIovec(&vecs[i], p)
		size += len(p)
	}
	return vecs
}

// advance drops n written bytes from the front.
func (b *batch) advance(n int) {
	for n > 0 && b.next < len(b.parts) {
		p := b.parts[b.next]
		if n < len(p) {
			b.parts[b.next] = p[n:]
			return
		}
		n -= len(p)
		b.parts[b.next] = nil
		b.next++
	}
}

// index returns m's index in the batch, or -1.
func (b *batch) index(m *wire.Message) int {
	for i, x := range b.msgs {
		if x == m {
			return i
		}
	}
	return -1
}

// detach copies what is left to write of message i into memory of the
// batch's own and forgets the message, so that its sender may reuse its
// memory now while the frame still goes out whole (the stream cannot skip
// the rest of a frame it has begun).
func (b *batch) detach(i int) {
	left := 0
	for k := b.next; k < len(b.parts); k++ {
		if b.owner[k] == int32(i) {
			left += len(b.parts[k])
		}
	}
	if left > 0 {
		buf := wire.NewBuffer(left)
		b.copies = append(b.copies, buf)
		dst := buf.Bytes()
		for k := b.next; k < len(b.parts); k++ {
			if b.owner[k] == int32(i) {
				n := copy(dst, b.parts[k])
				b.parts[k], dst = dst[:n:n], dst[n:]
				b.owner[k] = -1
			}
		}
	}
	b.msgs[i] = nil
}

// reset empties the batch once written, keeping its storage, and returns
// the messages to complete and those that failed to encode.
func (b *batch) reset() {
	clear(b.parts)
	clear(b.vecs)
	for _, c := range b.copies {
		c.Release()
	}
	clear(b.copies)
	b.parts, b.owner, b.copies, b.next = b.parts[:0], b.owner[:0], b.copies[:0], 0
	b.msgs, b.failed = nil, b.failed[:0]
}
