package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"
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
