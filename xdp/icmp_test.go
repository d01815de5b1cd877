package xdp_test

import (
	"encoding/binary"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/packet"
)

// ping sends one ICMP echo request from e to dst over a raw socket and
// reports whether the reply came back within d. (No ping binary needed.)
func ping(e *netns.End, dst netip.Addr, d time.Duration) (bool, error) {
	var ok bool
	err := e.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		tv := unix.NsecToTimeval(int64(10 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		const id, seq = 0x5357, 1
		req := make([]byte, 16)
		req[0] = 8 // echo request
		binary.BigEndian.PutUint16(req[4:], id)
		binary.BigEndian.PutUint16(req[6:], seq)
		binary.BigEndian.PutUint16(req[2:], packet.Checksum(req))
		if err := unix.Sendto(fd, req, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
			return err
		}
		buf := make([]byte, 1500)
		for deadline := time.Now().Add(d); time.Now().Before(deadline); {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue // timeout tick
			}
			ihl := int(buf[0]&0x0f) * 4
			if n >= ihl+8 && buf[ihl] == 0 && binary.BigEndian.Uint16(buf[ihl+4:]) == id {
				ok = true
				return nil
			}
		}
		return nil
	})
	return ok, err
}
