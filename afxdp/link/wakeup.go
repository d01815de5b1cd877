package link

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// poller puts the reactor to sleep until a link descriptor is readable,
// Wake is called, or a timeout passes.
//
// The link's descriptors are in the epoll instance only while the reactor
// sleeps. Armed all the time, every received packet woke a thread blocked
// in the netpoller (which found nothing to do), and every readiness check
// of an AF_XDP socket drove its transmit path, contending for the socket's
// mutex with the reactor's own kick. Registered but disarmed (no events),
// they still sat on the sockets' wait queues, so every packet received and
// every transmit completed ran epoll's callback under the queue's lock with
// interrupts off, inside the sender's kick. Added on sleeping and removed
// on waking, they cost a sequential call less kernel CPU (the sys-ns/op of
// afxdprpc's BenchmarkTransportProcesses).
//
// It does not sleep in ppoll: a goroutine blocked in a plain system call
// keeps its P (the scheduler's processor) until the runtime's monitor takes
// it back, which can be milliseconds later, and meanwhile the goroutines the
// reactor just made runnable (a Receive loop, a caller) wait. Instead the
// link's descriptors and an eventfd sit in an epoll instance of their own,
// and that epoll descriptor is handed to Go's netpoller, so the reactor
// parks like any goroutine blocked on a socket and frees its P at once.
type poller struct {
	epfd int
	fds  []int // the link's descriptors, armed in wait only
	// efd is read by wake on any goroutine; mu keeps close from closing it,
	// and the number from naming another descriptor, under a wake.
	mu     sync.RWMutex
	efd    int
	file   *os.File
	raw    syscall.RawConn
	ready  func(uintptr) bool // p.check, bound once so waiting allocates nothing
	events [8]unix.EpollEvent
	buf    [8]byte
}

func newPoller(fds ...int) (_ *poller, err error) {
	p := &poller{epfd: -1, efd: -1}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if p.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("afxdp: epoll: %w", err)
	}
	if p.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return nil, fmt.Errorf("afxdp: eventfd: %w", err)
	}
	p.fds = slices.Clone(fds)
	add := func(fd int, events uint32) error {
		ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
		if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("afxdp: epoll add fd %d: %w", fd, err)
		}
		return nil
	}
	if err := add(p.efd, unix.EPOLLIN); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(p.epfd, true); err != nil {
		return nil, fmt.Errorf("afxdp: epoll nonblock: %w", err)
	}
	p.file = os.NewFile(uintptr(p.epfd), "afxdp-poller")
	if p.raw, err = p.file.SyscallConn(); err != nil {
		return nil, fmt.Errorf("afxdp: poller: %w", err)
	}
	p.ready = p.check
	return p, nil
}

// check reports whether anything is ready, consuming a wake-up.
func (p *poller) check(uintptr) bool {
	n, _ := unix.EpollWait(p.epfd, p.events[:], 0)
	for _, ev := range p.events[:max(n, 0)] {
		if int(ev.Fd) == p.efd {
			unix.Read(p.efd, p.buf[:]) // reset the counter
		}
	}
	return n > 0
}

// wait sleeps until a descriptor is readable, wake is called, or d passes
// (d < 0: no limit).
func (p *poller) wait(d time.Duration) error {
	if err := p.arm(unix.EPOLL_CTL_ADD); err != nil {
		return err
	}
	defer p.arm(unix.EPOLL_CTL_DEL)
	var deadline time.Time
	if d >= 0 {
		deadline = time.Now().Add(d)
	}
	if err := p.file.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("afxdp: poller deadline: %w", err)
	}
	// Read checks once before it parks, so what is ready already (a
	// packet that came before arm) ends the wait without a second
	// epoll_wait; a deadline already past ends it without any, and a
	// wake-up left unconsumed ends the next wait at once.
	err := p.raw.Read(p.ready)
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("afxdp: poll: %w", err)
	}
	return nil
}

// arm adds the link's descriptors to the epoll instance (op
// EPOLL_CTL_ADD) or removes them (EPOLL_CTL_DEL). Adding a descriptor that
// is already readable reports it at once, so no packet that came before is
// missed.
func (p *poller) arm(op int) error {
	for _, fd := range p.fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		err := unix.EpollCtl(p.epfd, op, fd, &ev)
		// Left over from a half-done arm: the state wanted is there.
		if err == unix.EEXIST && op == unix.EPOLL_CTL_ADD || err == unix.ENOENT && op == unix.EPOLL_CTL_DEL {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("afxdp: epoll arm fd %d: %w", fd, err)
		}
	}
	return nil
}

// wake interrupts wait; safe for concurrent use, also with close, after
// which it does nothing.
func (p *poller) wake() {
	one := [8]byte{1}
	p.mu.RLock()
	if p.efd >= 0 {
		unix.Write(p.efd, one[:])
	}
	p.mu.RUnlock()
}

func (p *poller) close() error {
	var errs []error
	if p.file != nil {
		errs = append(errs, p.file.Close())
	} else if p.epfd >= 0 {
		errs = append(errs, unix.Close(p.epfd))
	}
	p.mu.Lock()
	if p.efd >= 0 {
		errs = append(errs, unix.Close(p.efd))
		p.efd = -1
	}
	p.mu.Unlock()
	return errors.Join(errs...)
}
