package xsk

import (
	"sync/atomic"
	"unsafe"
)

// ring is one of the four rings shared with the kernel. T is Desc for the
// RX and TX rings and uint64 (a UMEM address) for the fill and completion
// rings. The producer, consumer and flags words and the slots live in the
// kernel mapping; cachedProd and cachedCons are process-local copies.
//
// A ring is used from one side only: the process produces on the fill and
// TX rings (reserve/submit) and consumes on the RX and completion rings
// (peek/release).
type ring[T any] struct {
	producer *uint32 // shared
	consumer *uint32 // shared
	flags    *uint32 // shared
	slots    []T     // shared
	mask     uint32
	size     uint32

	cachedProd uint32 // local
	cachedCons uint32 // local
	mapping    []byte // the whole mmap'd region, for munmap
}

// initRing points r into mapping using the kernel's offsets.
func initRing[T any](r *ring[T], mapping []byte, prodOff, consOff, flagsOff, descOff uint64, size uint32) {
	base := unsafe.Pointer(unsafe.SliceData(mapping))
	r.producer = (*uint32)(unsafe.Add(base, prodOff))
	r.consumer = (*uint32)(unsafe.Add(base, consOff))
	r.flags = (*uint32)(unsafe.Add(base, flagsOff))
	r.slots = unsafe.Slice((*T)(unsafe.Add(base, descOff)), size)
	r.mask = size - 1
	r.size = size
	r.mapping = mapping
	r.cachedProd = atomic.LoadUint32(r.producer)
	r.cachedCons = atomic.LoadUint32(r.consumer)
}

// free returns how many slots the producer may fill, refreshing the cached
// consumer index (acquire) only when fewer than want are known to be free.
func (r *ring[T]) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n >= want {
		return n
	}
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return r.size - (r.cachedProd - r.cachedCons)
}

// reserve returns the index of the first of up to want free slots and how
// many were granted. The caller writes slot(idx+i) for i < n, then submit(n).
func (r *ring[T]) reserve(want uint32) (idx, n uint32) {
	n = min(r.free(want), want)
	return r.cachedProd, n
}

// submit publishes n reserved slots: the descriptors are already written,
// the producer index is stored with release.
func (r *ring[T]) submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.producer, r.cachedProd)
}

// peek returns the index of the first of up to want filled slots and how
// many there are, refreshing the cached producer index (acquire) only when
// fewer than want are known to be filled.
func (r *ring[T]) peek(want uint32) (idx, n uint32) {
	n = r.cachedProd - r.cachedCons
	if n < want {
		r.cachedProd = atomic.LoadUint32(r.producer)
		n = r.cachedProd - r.cachedCons
	}
	return r.cachedCons, min(n, want)
}

// release hands n consumed slots back: the slots are read, the consumer
// index is stored with release.
func (r *ring[T]) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.consumer, r.cachedCons)
}

// slot returns the slot for a free-running index.
func (r *ring[T]) slot(idx uint32) *T { return &r.slots[idx&r.mask] }

// needsWakeup reports whether the kernel asked for a wake-up on this ring.
func (r *ring[T]) needsWakeup() bool {
	return atomic.LoadUint32(r.flags)&xdpRingNeedWakeup != 0
}

// pending returns how many submitted slots the kernel has not consumed yet
// (producer side), reading the consumer index with acquire.
func (r *ring[T]) pending() uint32 {
	r.cachedCons = atomic.LoadUint32(r.consumer)
	return r.cachedProd - r.cachedCons
}
