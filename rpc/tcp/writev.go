package tcp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxIovecs is the kernel's IOV_MAX: a writev takes at most this many parts.
const maxIovecs = 1024

// writev writes vecs to fd once, without blocking: on a full socket it
// returns unix.EAGAIN. It is x/sys/unix.Writev without the slice that
// function allocates on every call.
func writev(fd uintptr, vecs []unix.Iovec) (int, error) {
	if len(vecs) == 0 {
		return 0, nil
	}
	for {
		n, _, errno := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&vecs[0])), uintptr(len(vecs)))
		switch errno {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, errno
	}
}

// setIovec points v at b.
func setIovec(v *unix.Iovec, b []byte) {
	v.Base = unsafe.SliceData(b)
	v.SetLen(len(b))
}
