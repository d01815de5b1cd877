package link

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/testwait"
)

// TestWakeAfterClose checks that a wake-up racing the close of its link
// does not write to the descriptor number the closed eventfd had, which
// the next descriptor opened takes over.
func TestWakeAfterClose(t *testing.T) {
	p, err := newPoller()
	if err != nil {
		t.Fatal(err)
	}
	old := p.efd
	if err := p.close(); err != nil {
		t.Fatal(err)
	}
	// Another eventfd takes the closed one's number, as the next
	// descriptor opened anywhere in the process could.
	fresh, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fresh)
	if err := unix.Dup3(fresh, old, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(old)
	fd := old
	p.wake()
	var buf [8]byte
	if n, err := unix.Read(fd, buf[:]); err != unix.EAGAIN {
		t.Fatalf("wake after close wrote to another descriptor: read %d bytes %v, err %v", n, buf, err)
	}
}

// TestWaitArmsLinkDescriptors: the link's descriptors are disarmed between
// waits, yet a wait reports data that arrived before it began, and data
// that arrives during it.
func TestWaitArmsLinkDescriptors(t *testing.T) {
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	p, err := newPoller(pipe[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	// Disarmed: readable data is not reported outside wait, and the
	// descriptor is not in the epoll instance at all (registered, it sits
	// on the socket's wait queue and costs every packet a callback).
	unix.Write(pipe[1], []byte{1})
	if p.check(0) {
		t.Fatal("a disarmed descriptor was reported")
	}
	info, err := epollInfo(p.epfd)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(info, fmt.Appendf(nil, "tfd: %8d ", pipe[0])) {
		t.Fatalf("the descriptor stays registered outside wait:\n%s", info)
	}
	if !bytes.Contains(info, fmt.Appendf(nil, "tfd: %8d ", p.efd)) {
		t.Fatalf("the eventfd is not registered, so the fdinfo format is not what this test reads:\n%s", info)
	}
	// Data that came before the wait ends it at once.
	const limit = 10 * time.Second
	start := time.Now()
	if err := p.wait(limit); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) >= limit {
		t.Fatal("wait missed data that arrived before it")
	}
	var buf [8]byte
	unix.Read(pipe[0], buf[:])
	// Data that comes during the wait ends it: written once the wait
	// has armed the descriptor, which the epoll instance's fdinfo shows.
	go func() {
		testwait.Until(limit, func() bool { return armed(p.epfd, pipe[0]) })
		unix.Write(pipe[1], []byte{2})
	}()
	start = time.Now()
	if err := p.wait(limit); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) >= limit {
		t.Fatal("wait missed data that arrived during it")
	}
}

// epollInfo returns the fdinfo of epoll instance epfd, which lists the
// descriptors registered in it.
func epollInfo(epfd int) ([]byte, error) {
	return os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", epfd))
}

// armed reports whether fd is registered in epoll instance epfd.
func armed(epfd, fd int) bool {
	info, err := epollInfo(epfd)
	return err == nil && bytes.Contains(info, fmt.Appendf(nil, "tfd: %8d ", fd))
}
