package afxdp

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// poller sleeps in ppoll on a link's descriptors and an eventfd that Wake
// writes, so another goroutine can interrupt the sleep with one write. It
// is owned by the reactor except for wake.
type poller struct {
	efd int
	pfd []unix.PollFd // the link's descriptors, then the eventfd
	ts  unix.Timespec
	buf [8]byte
}

func newPoller(fds ...int) (*poller, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("afxdp: eventfd: %w", err)
	}
	p := &poller{efd: efd}
	for _, fd := range fds {
		p.pfd = append(p.pfd, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	p.pfd = append(p.pfd, unix.PollFd{Fd: int32(efd), Events: unix.POLLIN})
	return p, nil
}

// wait sleeps until a descriptor is readable, wake is called, or d passes
// (d < 0: no limit). It does not allocate.
func (p *poller) wait(d time.Duration) error {
	var tsp *unix.Timespec
	if d >= 0 {
		p.ts = unix.NsecToTimespec(int64(d))
		tsp = &p.ts
	}
	for i := range p.pfd {
		p.pfd[i].Revents = 0
	}
	_, err := unix.Ppoll(p.pfd, tsp, nil)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("afxdp: poll: %w", err)
	}
	if p.pfd[len(p.pfd)-1].Revents&unix.POLLIN != 0 {
		unix.Read(p.efd, p.buf[:]) // reset the counter
	}
	return nil
}

// wake interrupts wait; safe for concurrent use.
func (p *poller) wake() {
	var one = [8]byte{1}
	unix.Write(p.efd, one[:])
}

func (p *poller) close() error { return unix.Close(p.efd) }
