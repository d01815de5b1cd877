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
// connection's mutex guards msgs, parts, owner and gen as well, because
// Withdraw takes a message's parts back between two writes (never during
// one: see tcpConn.inSyscall).
//
// A withdrawn message's rest is copied by its withdrawer without the lock
// (hold, then place): meanwhile its parts are held, and the writer writes
// up to the first held part and stops there, so that it neither reads
// memory whose owner is about to reuse it nor waits for the copy.
type batch struct {
	msgs   []*wire.Message // completed once written; nil once withdrawn
	failed []batchFailure  // messages that could not be encoded
	head   []byte
	parts  [][]byte // left to write: parts[next:]
	owner  []int32  // owner[i] is the index in msgs whose memory parts[i] is, or ownerNone or ownerHeld
	next   int
	gen    uint64 // counts resets: a held rest belongs to the batch of its gen
	vecs   []unix.Iovec
	copies []*wire.Buffer // private copies of withdrawn messages' parts
}

const (
	ownerNone int32 = -1 // the batch's own memory
	ownerHeld int32 = -2 // a withdrawn message's rest, being copied
)

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
			b.add(head[mark:], ownerNone)
			b.add(data, int32(i))
			mark = len(head)
		}
	}
	if mark < len(head) {
		b.add(head[mark:], ownerNone)
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

// blocked reports whether the next bytes to write are held (see hold).
func (b *batch) blocked() bool { return b.next < len(b.parts) && b.owner[b.next] == ownerHeld }

// vectors returns the next parts to write as iovecs, at most maxIovecs of
// them and maxWritev bytes, and none from a held part on: none at all when
// the batch is blocked.
func (b *batch) vectors() []unix.Iovec {
	n := min(len(b.parts)-b.next, maxIovecs)
	if cap(b.vecs) < n {
		b.vecs = make([]unix.Iovec, n)
	}
	vecs := b.vecs[:n]
	size := 0
	for i := range vecs {
		if b.owner[b.next+i] == ownerHeld {
			return vecs[:i]
		}
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

// A heldRest is what was left to write of a withdrawn message: the parts
// of the batch of generation gen that its withdrawer copies, without the
// connection's lock, into buf.
type heldRest struct {
	gen   uint64
	parts []heldPart
	left  int
	buf   *wire.Buffer
}

type heldPart struct {
	k int    // the part's index in the batch
	p []byte // the part: the sender's memory, then its copy
}

// hold forgets message i, whose sender takes its memory back, and holds
// what is left to write of it (see batch) for the sender to copy.
func (b *batch) hold(i int) heldRest {
	r := heldRest{gen: b.gen}
	for k := b.next; k < len(b.parts); k++ {
		if b.owner[k] == int32(i) {
			r.parts = append(r.parts, heldPart{k, b.parts[k]})
			r.left += len(b.parts[k])
			b.owner[k] = ownerHeld
		}
	}
	b.msgs[i] = nil
	return r
}

// copy copies the rest into a buffer of its own. It reads only the
// sender's memory, so it needs no lock.
func (r *heldRest) copy() {
	if withdrawCopyHook != nil {
		withdrawCopyHook()
	}
	r.buf = wire.NewBuffer(r.left)
	dst := r.buf.Bytes()
	for j := range r.parts {
		n := copy(dst, r.parts[j].p)
		r.parts[j].p, dst = dst[:n:n], dst[n:]
	}
}

// place points the held parts at their copy, so that the frame still goes
// out whole (the stream cannot skip the rest of a frame it has begun). It
// reports false, and the caller releases the copy, when the batch was
// reset meanwhile: it failed, and the rest will never be written.
func (b *batch) place(r *heldRest) bool {
	if r.gen != b.gen {
		return false
	}
	for _, h := range r.parts {
		b.parts[h.k], b.owner[h.k] = h.p, ownerNone
	}
	b.copies = append(b.copies, r.buf)
	return true
}

// withdrawCopyHook, when set by a test, runs as a withdrawn message's rest
// is copied.
var withdrawCopyHook func()

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
	b.gen++
}
