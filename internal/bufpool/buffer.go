package bufpool

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Align is the alignment of every buffer's first byte.
const Align = 64

const (
	minClassShift = 6  // 64 B
	maxClassShift = 30 // 1 GiB; larger buffers are not pooled
	numClasses    = maxClassShift - minClassShift + 1
)

var pools [numClasses]sync.Pool

// Large buffers are also kept, up to retainBytes a class, on free lists
// the garbage collector does not empty. A sync.Pool is cleared within two
// collections, and a job moving large tensors collects often: each time,
// the next large receive allocated and zeroed its buffer again, which for
// 16 MiB stalled the receiving reactor for milliseconds (long enough for
// its peer to time out and resend a window).
const (
	retainMinShift = 20       // 1 MiB
	retainBytes    = 32 << 20 // per class
)

var retained [numClasses]struct {
	mu   sync.Mutex
	free []*Buffer
}

// live counts buffers handed out and not yet released, so tests can assert
// that a path leaks nothing.
var live atomic.Int64

// A Buffer is an aligned byte buffer with a reference count. Get returns it
// with one reference, owned by the caller; Ref adds an owner and Release drops
// one. When the last owner releases it the memory goes back to the pool, so no
// owner may touch Bytes after its own Release.
type Buffer struct {
	data   []byte // len = requested size, cap = class size
	refs   atomic.Int32
	class  int8 // -1 when not pooled
	mapped bool // data is an anonymous mapping, unmapped on release
}

// Get returns a buffer of n bytes with one reference. Its contents are
// unspecified.
func Get(n int) *Buffer {
	if n < 0 {
		panic(fmt.Sprintf("bufpool: negative size %d", n))
	}
	c := classOf(n)
	var b *Buffer
	if c >= 0 {
		b = takeRetained(c)
		if b == nil {
			if v := pools[c].Get(); v != nil {
				b = v.(*Buffer)
			}
		}
	}
	if b == nil {
		size := n
		if c >= 0 {
			size = 1 << (c + minClassShift)
		}
		if size >= 1<<mapMinShift {
			b = &Buffer{data: mappedBytes(size), class: int8(c), mapped: true}
		} else {
			b = &Buffer{data: alignedBytes(size), class: int8(c)}
		}
	}
	b.data = b.data[:n]
	b.refs.Store(1)
	live.Add(1)
	return b
}

// Bytes returns the buffer's memory. It stays valid until the caller's
// reference is released.
func (b *Buffer) Bytes() []byte { return b.data }

// Len returns the buffer's size in bytes.
func (b *Buffer) Len() int { return len(b.data) }

// Ref adds an owner and returns b.
func (b *Buffer) Ref() *Buffer {
	if b.refs.Add(1) <= 1 {
		panic("bufpool: Ref of a released buffer")
	}
	return b
}

// Release drops one owner; the last one returns the memory to its pool.
// Releasing a nil buffer does nothing.
func (b *Buffer) Release() {
	if b == nil {
		return
	}
	switch n := b.refs.Add(-1); {
	case n > 0:
		return
	case n < 0:
		panic("bufpool: Release of a released buffer")
	}
	live.Add(-1)
	if b.mapped {
		unmap(b.data)
		b.data = nil
		return
	}
	if b.class >= 0 && !retain(b) {
		pools[b.class].Put(b)
	}
}

// retainLimit is how many buffers of class c the free lists keep.
func retainLimit(c int) int {
	shift := c + minClassShift
	if shift < retainMinShift || shift > maxClassShift {
		return 0
	}
	return retainBytes >> shift
}

// retain keeps b on its class's free list if there is room.
func retain(b *Buffer) bool {
	c := int(b.class)
	limit := retainLimit(c)
	if limit == 0 {
		return false
	}
	r := &retained[c]
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.free) >= limit {
		return false
	}
	r.free = append(r.free, b)
	return true
}

func takeRetained(c int) *Buffer {
	if retainLimit(c) == 0 {
		return nil
	}
	r := &retained[c]
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.free)
	if n == 0 {
		return nil
	}
	b := r.free[n-1]
	r.free[n-1] = nil
	r.free = r.free[:n-1]
	return b
}

// Live returns how many buffers are held by someone. Tests compare it before
// and after a piece of work to catch leaks.
func Live() int64 { return live.Load() }

func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > maxClassShift {
		return -1
	}
	return shift - minClassShift
}

// alignedBytes over-allocates so that the returned slice starts on an Align
// boundary; the garbage collector keeps the whole allocation alive through it.
func alignedBytes(n int) []byte {
	raw := make([]byte, n+Align-1)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % Align); r != 0 {
		off = Align - r
	}
	return raw[off : off+n : off+n]
}
