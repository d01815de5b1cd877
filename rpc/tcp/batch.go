package tcp

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
// one: see conn.inSyscall).
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
	begun  bool // parts[next] is partly written
	spans  []span
	gen    uint64 // counts resets: a held rest belongs to the batch of its gen
	vecs   []unix.Iovec
	copies []*wire.Buffer // private copies of withdrawn messages' parts
}

// A span is the parts parts[first:end] that hold all of one message's
// frame and nothing else, laid out for a message with tensors of its own
// (first is -1 for one copied whole into the head), so that a message none
// of which was written leaves the batch when withdrawn, and neither is
// copied nor reaches the peer.
type span struct{ first, end int32 }

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
	b.spans = b.spans[:0]
	for i, m := range b.msgs {
		start := len(head)
		var err error
		if head, err = wire.AppendHead(head, m); err != nil {
			b.failed = append(b.failed, batchFailure{m, fmt.Errorf("tcp: encode %v frame for call %d: %w", m.Header.Kind, m.Header.CallID, err)})
			b.msgs[i] = nil
			head = head[:start]
			b.spans = append(b.spans, span{-1, -1})
			continue
		}
		sp := span{-1, -1}
		if ownsParts(m) {
			b.add(head[mark:start], ownerNone)
			mark = start
			sp.first = int32(len(b.parts))
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
		if sp.first >= 0 {
			b.add(head[mark:], ownerNone)
			mark = len(head)
			sp.end = int32(len(b.parts))
		}
		b.spans = append(b.spans, sp)
	}
	if mark < len(head) {
		b.add(head[mark:], ownerNone)
	}
	b.head = head
}

// ownsParts reports whether a tensor of m is written from its own memory.
func ownsParts(m *wire.Message) bool {
	for j := range m.Tensors {
		if len(m.Tensors[j].Data) >= copyThreshold {
			return true
		}
	}
	return false
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
	vecs, size := b.vecs[:0], 0
	for k := b.next; k < len(b.parts) && len(vecs) < maxIovecs && b.owner[k] != ownerHeld; k++ {
		p := b.parts[k]
		if len(p) == 0 {
			continue // a dropped message's
		}
		var v unix.Iovec
		if size+len(p) >= maxWritev {
			setIovec(&v, p[:maxWritev-size])
			vecs = append(vecs, v)
			break
		}
		setIovec(&v, p)
		vecs = append(vecs, v)
		size += len(p)
	}
	b.vecs = vecs
	return vecs
}

// advance drops n written bytes from the front.
func (b *batch) advance(n int) {
	for n > 0 && b.next < len(b.parts) {
		p := b.parts[b.next]
		if n < len(p) {
			b.parts[b.next], b.begun = p[n:], true
			return
		}
		n -= len(p)
		b.parts[b.next], b.begun = nil, false
		b.next++
	}
	b.skipDropped()
}

// skipDropped moves next past parts a dropped message left empty. Only
// the writer moves next: it reads pending without the lock.
func (b *batch) skipDropped() {
	for b.next < len(b.parts) && len(b.parts[b.next]) == 0 {
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

// unstarted reports whether none of message i was written and it can
// leave the batch (drop).
func (b *batch) unstarted(i int) bool {
	sp := b.spans[i]
	return sp.first >= 0 && (b.next < int(sp.first) || (b.next == int(sp.first) && !b.begun))
}

// drop takes message i, none of which was written, out of the batch. Its
// parts are left empty, for the writer to skip.
func (b *batch) drop(i int) {
	sp := b.spans[i]
	for k := sp.first; k < sp.end; k++ {
		b.parts[k], b.owner[k] = nil, ownerNone
	}
	b.msgs[i] = nil
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
	b.parts, b.owner, b.copies, b.next, b.begun = b.parts[:0], b.owner[:0], b.copies[:0], 0, false
	b.msgs, b.failed, b.spans = nil, b.failed[:0], b.spans[:0]
	b.gen++
}
