package xsk

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const xdpRingNeedWakeup = unix.XDP_RING_NEED_WAKEUP

// setsockopt passes a pointer-sized option value; x/sys/unix has no typed
// helper for the XDP structures.
func setsockopt(fd, name int, val unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(val), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockopt(fd, name int, val unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(name), uintptr(val), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// kickTx asks the kernel to transmit from the TX ring. It is a zero-length
// sendto without a destination; it does not allocate.
func kickTx(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// kickRx asks the kernel to process the fill ring (zero-copy drivers that
// set need_wakeup on it).
func kickRx(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}
