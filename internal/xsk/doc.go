// Package xsk is a small AF_XDP socket layer: one UMEM, its fill and
// completion rings, and the socket's RX and TX rings, mapped from the kernel
// and driven without allocation or locks.
//
// # Ownership
//
// A Socket is owned by one goroutine. The four rings are single-producer,
// single-consumer by kernel contract, so no Socket method is safe for
// concurrent use; the exception is FD, which may be read from anywhere.
//
// Every UMEM chunk (a "frame") is in exactly one place at a time:
//
//   - the process-local free stack (AllocFrame takes, FreeFrame returns);
//   - the fill ring (RefillFill moves free frames there for the kernel);
//   - the caller's hands, after Receive returned its descriptor or after
//     AllocFrame, until the caller either calls FreeFrame or queues it with
//     Transmit;
//   - the TX ring or in flight in the kernel, until ReapCompletions returns it
//     to the free stack.
//
// Addresses handed out by Receive may point into a chunk (copy mode places
// packets XDP_PACKET_HEADROOM bytes after the chunk start); FreeFrame and
// ReapCompletions mask addresses to the chunk start, so callers may pass
// either.
//
// # Memory ordering on the shared rings
//
// Each ring has a producer and a consumer index in memory shared with the
// kernel. The contract, implemented by ring:
//
//   - producer reserve loads the consumer index with acquire, so the slots it
//     hands out are no longer read by the consumer;
//   - submit writes the descriptors, then stores the producer index with
//     release, so the consumer sees the descriptors before the index;
//   - consumer peek loads the producer index with acquire, then reads the
//     descriptors;
//   - release finishes reading, then stores the consumer index with release.
//
// sync/atomic loads and stores are sequentially consistent, which is at least
// as strong as acquire/release. Both sides also keep cached copies of the
// indices so the hot path touches the shared cache line only when the cache
// runs out.
//
// # Wake-ups
//
// The socket is bound with XDP_USE_NEED_WAKEUP when the kernel accepts it.
// In copy mode every TX needs a sendto kick and the kernel takes at most 32
// descriptors per kick; Kick keeps kicking until the TX ring is drained (a
// bounded number of times).
package xsk
