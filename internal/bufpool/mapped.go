package bufpool

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Buffers of 1<<mapMinShift bytes and more are anonymous mappings of their
// own rather than heap memory. The kernel commits a mapping's pages only as
// they are first written, so a buffer sized from a peer's header costs
// memory only as the bytes it announced arrive; and unmapping returns the
// memory at once, where a freed heap object would be zeroed (touching every
// page) when reused and would raise the garbage collector's heap target.
// Such buffers are neither pooled nor retained: they are rare, and a
// reused one would hold its pages.
const mapMinShift = 26 // 64 MiB

func mappedBytes(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		// As the runtime does when the heap cannot grow.
		panic(fmt.Sprintf("bufpool: map %d bytes: %v", n, err))
	}
	return b[:n:n]
}

func unmap(b []byte) {
	if err := unix.Munmap(b[:cap(b)]); err != nil {
		panic(fmt.Sprintf("bufpool: unmap %d bytes: %v", cap(b), err))
	}
}
