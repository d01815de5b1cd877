package link

import (
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDPOptions configure a UDPLink. The zero value suits a 1500-byte MTU.
type UDPOptions struct {
	// MaxPayload is the datagram size; 0 means 1472 (a 1500-byte MTU less
	// the IPv4 and UDP headers). Larger values make the kernel fragment.
	MaxPayload int
	// Batch is the number of datagrams per sendmmsg and recvmmsg; 0 means 64.
	Batch int
	// SocketBuffer sizes the kernel's send and receive buffers; 0 means 4 MiB.
	SocketBuffer int
}

// UDPLink is a Link over a kernel UDP socket (IPv4): the fallback where
// AF_XDP is unavailable, and the peer of an XSKLink on a host without it.
// Datagrams leave in sendmmsg batches and arrive in recvmmsg batches, into
// buffers the link owns.
type UDPLink struct {
	fd     int
	local  netip.AddrPort
	maxPay int
	poll   *poller
	closed atomic.Bool
	tx, rx mmsgBatch
	txN    int
	outPfd [1]unix.PollFd
}

// mmsgBatch is the preallocated state of one sendmmsg or recvmmsg call.
type mmsgBatch struct {
	bufs  [][]byte
	names []unix.RawSockaddrInet4
	iov   []unix.Iovec
	msgs  []unix.Mmsghdr
}

func newBatch(n, size int) mmsgBatch {
	b := mmsgBatch{bufs: make([][]byte, n), names: make([]unix.RawSockaddrInet4, n), iov: make([]unix.Iovec, n), msgs: make([]unix.Mmsghdr, n)}
	for i := range n {
		b.bufs[i] = make([]byte, size)
		b.iov[i].Base = &b.bufs[i][0]
		b.iov[i].SetLen(size)
		b.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		b.msgs[i].Hdr.Iov = &b.iov[i]
		b.msgs[i].Hdr.Iovlen = 1
	}
	return b
}

// ListenUDP opens a UDPLink bound to addr ("ip:port"; port 0 picks one).
func ListenUDP(addr string, opts UDPOptions) (_ *UDPLink, err error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("afxdp: listen udp %s: want an IPv4 ip:port", addr)
	}
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = 1472
	}
	if opts.Batch <= 0 {
		opts.Batch = 64
	}
	if opts.SocketBuffer <= 0 {
		opts.SocketBuffer = 4 << 20
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afxdp: listen udp %s: %w", addr, err)
	}
	l := &UDPLink{fd: fd, maxPay: opts.MaxPayload}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	// Forced sizes need CAP_NET_ADMIN; the plain ones are capped by sysctl.
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, opts.SocketBuffer) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, opts.SocketBuffer)
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, opts.SocketBuffer) != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, opts.SocketBuffer)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: ap.Addr().Unmap().As4(), Port: int(ap.Port())}); err != nil {
		return nil, fmt.Errorf("afxdp: listen udp %s: %w", addr, err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, fmt.Errorf("afxdp: listen udp %s: %w", addr, err)
	}
	in4 := sa.(*unix.SockaddrInet4)
	l.local = netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port))
	if l.poll, err = newPoller(fd); err != nil {
		return nil, err
	}
	l.tx, l.rx = newBatch(opts.Batch, opts.MaxPayload), newBatch(opts.Batch, opts.MaxPayload)
	return l, nil
}

// MaxPayload implements Link.
func (l *UDPLink) MaxPayload() int { return l.maxPay }

// LocalAddr implements Link.
func (l *UDPLink) LocalAddr() netip.AddrPort { return l.local }

// TxBuffer implements Link. A full batch is sent first.
func (l *UDPLink) TxBuffer() []byte {
	if l.txN == len(l.tx.bufs) {
		l.Flush()
		if l.txN == len(l.tx.bufs) {
			return nil
		}
	}
	return l.tx.bufs[l.txN]
}

// Queue implements Link.
func (l *UDPLink) Queue(n int, to netip.AddrPort) {
	i := l.txN
	l.tx.iov[i].SetLen(n)
	l.tx.names[i] = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: to.Addr().As4()}
	p := (*[2]byte)(unsafe.Pointer(&l.tx.names[i].Port))
	p[0], p[1] = byte(to.Port()>>8), byte(to.Port())
	l.txN++
}

// maxSendWait bounds how long Flush waits for room in the socket buffer
// before dropping the rest of a batch (the protocol resends it).
const maxSendWait = 2 * time.Millisecond

// Flush implements Link.
func (l *UDPLink) Flush() error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	sent := 0
	deadline := time.Time{}
	for sent < l.txN {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(l.fd), uintptr(unsafe.Pointer(&l.tx.msgs[sent])), uintptr(l.txN-sent), 0, 0, 0)
		switch e {
		case 0:
			sent += int(n)
			continue
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.ENOBUFS:
			if deadline.IsZero() {
				deadline = time.Now().Add(maxSendWait)
			} else if time.Now().After(deadline) {
				l.txN = 0
				return nil // dropped, like a full NIC queue
			}
			l.outPfd[0] = unix.PollFd{Fd: int32(l.fd), Events: unix.POLLOUT}
			unix.Poll(l.outPfd[:], 1)
			continue
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EPERM:
			sent++ // that datagram is lost; the peer's silence is handled above
			continue
		default:
			l.txN = 0
			return fmt.Errorf("afxdp: sendmmsg on %v: %w", l.local, e)
		}
	}
	l.txN = 0 // Queue sets each iovec's length, so none needs resetting
	return nil
}

// Receive implements Link.
func (l *UDPLink) Receive(pkts []Datagram) (int, error) {
	if l.closed.Load() {
		return 0, ErrLinkClosed
	}
	want := min(len(pkts), len(l.rx.msgs))
	for i := range want {
		l.rx.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(l.fd), uintptr(unsafe.Pointer(&l.rx.msgs[0])), uintptr(want), unix.MSG_DONTWAIT, 0, 0)
	switch e {
	case 0:
	case unix.EAGAIN, unix.EINTR, unix.ECONNREFUSED:
		return 0, nil
	default:
		return 0, fmt.Errorf("afxdp: recvmmsg on %v: %w", l.local, e)
	}
	for i := range int(n) {
		name := &l.rx.names[i]
		p := (*[2]byte)(unsafe.Pointer(&name.Port))
		pkts[i] = Datagram{
			Data: l.rx.bufs[i][:l.rx.msgs[i].Len],
			From: netip.AddrPortFrom(netip.AddrFrom4(name.Addr), uint16(p[0])<<8|uint16(p[1])),
		}
	}
	return int(n), nil
}

// Wait implements Link.
func (l *UDPLink) Wait(d time.Duration) error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	return l.poll.wait(d)
}

// Wake implements Link.
func (l *UDPLink) Wake() {
	if !l.closed.Load() {
		l.poll.wake()
	}
}

// Close implements Link.
func (l *UDPLink) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	err := errors.Join(unix.Close(l.fd), l.poll.close())
	if err != nil {
		return fmt.Errorf("afxdp: close udp %v: %w", l.local, err)
	}
	return nil
}
