package xsk

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Desc is one RX or TX descriptor, laid out as the kernel's struct xdp_desc:
// Addr is a UMEM offset, Len the packet length.
type Desc struct {
	Addr    uint64
	Len     uint32
	Options uint32
}

// Socket is an AF_XDP socket bound to one queue of one interface, with its
// own UMEM. See the package doc for frame ownership; a Socket is used by one
// goroutine at a time.
type Socket struct {
	fd         int
	umem       []byte // process-local mapping registered with the kernel
	frameSize  uint64
	frameMask  uint64
	frames     frameStack
	fill       ring[uint64]
	comp       ring[uint64]
	rx         ring[Desc]
	tx         ring[Desc]
	needWakeup bool
	mode       BindMode
	pfd        [1]unix.PollFd
	ts         unix.Timespec
	closed     bool
}

// Open creates a socket with its UMEM, maps its rings, fills the fill ring
// and binds it to queue of ifindex. It binds with XDP_USE_NEED_WAKEUP unless
// cfg says otherwise or the kernel refuses it.
func Open(ifindex, queue int, cfg Config) (_ *Socket, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("xsk: socket: %w", err)
	}
	s := &Socket{fd: fd, frameSize: uint64(cfg.FrameSize), frameMask: ^uint64(cfg.FrameSize - 1)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.registerUmem(cfg); err != nil {
		return nil, err
	}
	if err := s.mapRings(cfg); err != nil {
		return nil, err
	}
	s.frames = newFrameStack(cfg.NumFrames, s.frameSize)
	s.RefillFill()
	if err := s.bind(ifindex, queue, cfg); err != nil {
		return nil, err
	}
	s.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	return s, nil
}

func (s *Socket) registerUmem(cfg Config) error {
	size := cfg.FrameSize * cfg.NumFrames
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("xsk: mmap umem of %d bytes: %w", size, err)
	}
	s.umem = mem
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem)))),
		Len:  uint64(size),
		Size: uint32(cfg.FrameSize),
	}
	if err := setsockopt(s.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return fmt.Errorf("xsk: register umem: %w", err)
	}
	return nil
}

func (s *Socket) mapRings(cfg Config) error {
	sizes := []struct {
		opt, n int
		name   string
	}{
		{unix.XDP_UMEM_FILL_RING, cfg.FillSize, "fill"},
		{unix.XDP_UMEM_COMPLETION_RING, cfg.CompletionSize, "completion"},
		{unix.XDP_RX_RING, cfg.RxSize, "rx"},
		{unix.XDP_TX_RING, cfg.TxSize, "tx"},
	}
	for _, r := range sizes {
		n := int32(r.n)
		if err := setsockopt(s.fd, r.opt, unsafe.Pointer(&n), 4); err != nil {
			return fmt.Errorf("xsk: size %s ring to %d: %w", r.name, r.n, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err := getsockopt(s.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return fmt.Errorf("xsk: ring offsets: %w", err)
	}
	mapRing := func(o unix.XDPRingOffset, n int, descSize uintptr, pgoff int64, name string) ([]byte, error) {
		m, err := unix.Mmap(s.fd, pgoff, int(o.Desc)+n*int(descSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return nil, fmt.Errorf("xsk: map %s ring: %w", name, err)
		}
		return m, nil
	}
	m, err := mapRing(off.Fr, cfg.FillSize, 8, unix.XDP_UMEM_PGOFF_FILL_RING, "fill")
	if err != nil {
		return err
	}
	initRing(&s.fill, m, off.Fr.Producer, off.Fr.Consumer, off.Fr.Flags, off.Fr.Desc, uint32(cfg.FillSize))
	if m, err = mapRing(off.Cr, cfg.CompletionSize, 8, unix.XDP_UMEM_PGOFF_COMPLETION_RING, "completion"); err != nil {
		return err
	}
	initRing(&s.comp, m, off.Cr.Producer, off.Cr.Consumer, off.Cr.Flags, off.Cr.Desc, uint32(cfg.CompletionSize))
	if m, err = mapRing(off.Rx, cfg.RxSize, unsafe.Sizeof(Desc{}), unix.XDP_PGOFF_RX_RING, "rx"); err != nil {
		return err
	}
	initRing(&s.rx, m, off.Rx.Producer, off.Rx.Consumer, off.Rx.Flags, off.Rx.Desc, uint32(cfg.RxSize))
	if m, err = mapRing(off.Tx, cfg.TxSize, unsafe.Sizeof(Desc{}), unix.XDP_PGOFF_TX_RING, "tx"); err != nil {
		return err
	}
	initRing(&s.tx, m, off.Tx.Producer, off.Tx.Consumer, off.Tx.Flags, off.Tx.Desc, uint32(cfg.TxSize))
	return nil
}

func (s *Socket) bind(ifindex, queue int, cfg Config) error {
	var flags uint16
	switch cfg.Mode {
	case ModeCopy:
		flags |= unix.XDP_COPY
	case ModeZeroCopy:
		flags |= unix.XDP_ZEROCOPY
	}
	sa := &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}
	if !cfg.NoNeedWakeup {
		sa.Flags = flags | unix.XDP_USE_NEED_WAKEUP
		err := bindRetry(s.fd, sa)
		if err == nil {
			s.needWakeup = true
			return s.readMode()
		}
		if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
			return fmt.Errorf("xsk: bind ifindex %d queue %d: %w", ifindex, queue, err)
		}
		sa.Flags = flags
	}
	if err := bindRetry(s.fd, sa); err != nil {
		return fmt.Errorf("xsk: bind ifindex %d queue %d: %w", ifindex, queue, err)
	}
	return s.readMode()
}

// Bind retry budget for EBUSY: 5s. The kernel's work queue ran the
// release later than the 500ms this was on a loaded 2-core machine (a
// benchmark sweep reopening a queue failed with EBUSY, twice in one test
// run); only a queue that another socket really holds waits it out.
const (
	bindRetries    = 1000
	bindRetryPause = 5 * time.Millisecond
)

// bindRetry binds, retrying EBUSY for a bounded time: the kernel releases
// a closed socket's hold on its queue from a work queue, so a socket opened
// right after another one on the same queue was closed can find the queue
// still busy for a moment.
func bindRetry(fd int, sa *unix.SockaddrXDP) error {
	for i := 0; ; i++ {
		err := unix.Bind(fd, sa)
		if !errors.Is(err, unix.EBUSY) || i == bindRetries {
			return err
		}
		time.Sleep(bindRetryPause)
	}
}

func (s *Socket) readMode() error {
	var opts uint32
	if err := getsockopt(s.fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), 4); err != nil {
		return fmt.Errorf("xsk: read options: %w", err)
	}
	s.mode = ModeCopy
	if opts&unix.XDP_OPTIONS_ZEROCOPY != 0 {
		s.mode = ModeZeroCopy
	}
	return nil
}

// FD returns the socket's file descriptor, the value an XSKMAP entry takes.
func (s *Socket) FD() int { return s.fd }

// Mode returns the mode the kernel bound the socket in: ModeCopy or
// ModeZeroCopy.
func (s *Socket) Mode() BindMode { return s.mode }

// UsesNeedWakeup reports whether the socket was bound with
// XDP_USE_NEED_WAKEUP.
func (s *Socket) UsesNeedWakeup() bool { return s.needWakeup }

// FrameSize returns the UMEM chunk size.
func (s *Socket) FrameSize() int { return int(s.frameSize) }

// Frame returns the UMEM bytes from addr to the end of its chunk. The view
// aliases memory the kernel reads and writes: it is valid while the caller
// owns the frame (see the package doc).
func (s *Socket) Frame(addr uint64) []byte {
	end := addr&s.frameMask + s.frameSize
	return s.umem[addr:end:end]
}

// Packet returns the bytes a received descriptor describes; the same
// ownership rule as Frame applies.
func (s *Socket) Packet(d Desc) []byte {
	end := d.Addr + uint64(d.Len)
	return s.umem[d.Addr:end:end]
}

// AllocFrame takes a free chunk for the caller, returning its address.
func (s *Socket) AllocFrame() (addr uint64, ok bool) { return s.frames.pop() }

// FreeFrame returns a chunk the caller owns to the free stack. addr may
// point anywhere inside the chunk.
func (s *Socket) FreeFrame(addr uint64) { s.frames.push(addr & s.frameMask) }

// FreeFrames returns how many chunks are on the free stack.
func (s *Socket) FreeFrames() int { return s.frames.n }

// NumFrames returns how many chunks the UMEM has.
func (s *Socket) NumFrames() int { return len(s.frames.addrs) }

// RingFrames returns how many chunks sit in the four rings: given to the
// kernel on the fill and TX rings and not taken yet, or handed back on the
// RX and completion rings and not read yet. With FreeFrames and the chunks
// the caller holds, it accounts for every chunk of the UMEM while no
// packet is in the kernel's hands between two rings.
func (s *Socket) RingFrames() int {
	if s.closed {
		return 0
	}
	fill := s.fill.cachedProd - atomic.LoadUint32(s.fill.consumer)
	tx := s.tx.cachedProd - atomic.LoadUint32(s.tx.consumer)
	rx := atomic.LoadUint32(s.rx.producer) - s.rx.cachedCons
	comp := atomic.LoadUint32(s.comp.producer) - s.comp.cachedCons
	return int(fill + tx + rx + comp)
}

// RefillFill moves free chunks onto the fill ring until it is full or the
// free stack is empty, and returns how many it moved. With the default
// ring sizes, at most half of the UMEM sits in the fill ring, so the rest
// stays available to AllocFrame.
func (s *Socket) RefillFill() int {
	if s.closed {
		return 0
	}
	idx, n := s.fill.reserve(uint32(s.frames.n))
	for i := range n {
		addr, _ := s.frames.pop()
		*s.fill.slot(idx + i) = addr
	}
	if n > 0 {
		s.fill.submit(n)
	}
	return int(n)
}

// Receive copies up to len(out) received descriptors into out and returns
// how many. The caller now owns their frames and must FreeFrame or
// Transmit each of them; RefillFill replaces them on the fill ring.
func (s *Socket) Receive(out []Desc) int {
	if s.closed {
		return 0
	}
	idx, n := s.rx.peek(uint32(len(out)))
	for i := range n {
		out[i] = *s.rx.slot(idx + i)
	}
	if n > 0 {
		s.rx.release(n)
	}
	return int(n)
}

// Transmit queues up to len(descs) descriptors on the TX ring and returns
// how many it queued; the kernel owns those frames until ReapCompletions.
// Nothing is sent until Kick (copy mode) or the driver's own schedule.
func (s *Socket) Transmit(descs []Desc) int {
	if s.closed {
		return 0
	}
	idx, n := s.tx.reserve(uint32(len(descs)))
	for i := range n {
		*s.tx.slot(idx + i) = descs[i]
	}
	if n > 0 {
		s.tx.submit(n)
	}
	return int(n)
}

// TxPending returns how many queued descriptors the kernel has not taken
// from the TX ring yet.
func (s *Socket) TxPending() int {
	if s.closed {
		return 0
	}
	return int(s.tx.pending())
}

// TxNeedsWakeup reports whether the kernel asks for a sendto to process the
// TX ring (always true without XDP_USE_NEED_WAKEUP).
func (s *Socket) TxNeedsWakeup() bool { return !s.closed && (!s.needWakeup || s.tx.needsWakeup()) }

// FillNeedsWakeup reports whether the kernel asks for a wake-up (poll or
// recvfrom) to process the fill ring.
func (s *Socket) FillNeedsWakeup() bool {
	return !s.closed && (!s.needWakeup || s.fill.needsWakeup())
}

// maxKickRounds bounds Kick when the kernel keeps refusing work.
const maxKickRounds = 16

// Kick wakes the kernel to transmit and keeps kicking until the TX ring is
// drained. Transient refusals (EAGAIN, EBUSY, ENOBUFS, EINTR) make it reap
// completions and retry; if the ring is still not drained after a bounded
// number of kicks that made no progress, it returns ErrTxStalled wrapped.
// Other errors are returned wrapped; queued descriptors stay queued.
func (s *Socket) Kick() error {
	if s.closed {
		return fmt.Errorf("xsk: kick tx: %w", ErrClosed)
	}
	stuck := 0
	for {
		pending := s.tx.pending()
		if pending == 0 {
			return nil
		}
		if !s.TxNeedsWakeup() {
			return nil // the driver drains the ring on its own
		}
		switch e := kickTx(s.fd); e {
		case 0:
		case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
			s.ReapCompletions()
		default:
			return fmt.Errorf("xsk: kick tx: %w", e)
		}
		if s.tx.pending() < pending {
			stuck = 0
			continue
		}
		if stuck++; stuck >= maxKickRounds {
			return fmt.Errorf("xsk: kick tx, %d descriptors left: %w", pending, ErrTxStalled)
		}
	}
}

// ReapCompletions returns every completed TX frame to the free stack and
// returns how many.
func (s *Socket) ReapCompletions() int {
	if s.closed {
		return 0
	}
	idx, n := s.comp.peek(s.comp.size)
	for i := range n {
		s.frames.push(*s.comp.slot(idx + i) & s.frameMask)
	}
	if n > 0 {
		s.comp.release(n)
	}
	return int(n)
}

// WakeRx asks the kernel to process the fill ring; needed only when
// FillNeedsWakeup reports true and the caller is not about to Poll.
func (s *Socket) WakeRx() error {
	if s.closed {
		return fmt.Errorf("xsk: wake rx: %w", ErrClosed)
	}
	switch e := kickRx(s.fd); e {
	case 0, unix.EAGAIN, unix.EBUSY, unix.EINTR:
		return nil
	default:
		return fmt.Errorf("xsk: wake rx: %w", e)
	}
}

// Poll waits up to timeout for a received packet (POLLIN) and reports
// whether one is ready. A negative timeout waits indefinitely; EINTR counts
// as a timeout. It does not allocate.
func (s *Socket) Poll(timeout time.Duration) (bool, error) {
	if s.closed {
		return false, fmt.Errorf("xsk: poll: %w", ErrClosed)
	}
	var tsp *unix.Timespec
	if timeout >= 0 {
		s.ts = unix.NsecToTimespec(int64(timeout))
		tsp = &s.ts
	}
	s.pfd[0].Revents = 0
	n, err := unix.Ppoll(s.pfd[:], tsp, nil)
	if err != nil {
		if errors.Is(err, unix.EINTR) {
			return false, nil
		}
		return false, fmt.Errorf("xsk: poll: %w", err)
	}
	if n > 0 && s.pfd[0].Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
		return false, fmt.Errorf("xsk: poll: revents %#x", s.pfd[0].Revents)
	}
	return n > 0 && s.pfd[0].Revents&unix.POLLIN != 0, nil
}

// Stats are the kernel's per-socket counters (XDP_STATISTICS).
type Stats = unix.XDPStatistics

// Stats reads the kernel's counters for this socket.
func (s *Socket) Stats() (Stats, error) {
	var st Stats
	if s.closed {
		return st, fmt.Errorf("xsk: statistics: %w", ErrClosed)
	}
	if err := getsockopt(s.fd, unix.XDP_STATISTICS, unsafe.Pointer(&st), unsafe.Sizeof(st)); err != nil {
		return st, fmt.Errorf("xsk: statistics: %w", err)
	}
	return st, nil
}

// Close closes the socket and unmaps its rings and UMEM. Every view
// returned by Frame or Packet becomes invalid, and Frame and Packet must
// not be called again; the ring operations do nothing and the
// system-call ones return ErrClosed. The kernel releases the
// queue once no XSKMAP entry refers to the socket (unregister it first)
// and, asynchronously, a moment later; Open retries EBUSY for that
// reason. Close is idempotent.
func (s *Socket) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := unix.Close(s.fd)
	for _, m := range [][]byte{s.fill.mapping, s.comp.mapping, s.rx.mapping, s.tx.mapping, s.umem} {
		if m != nil {
			if e := unix.Munmap(m); e != nil && err == nil {
				err = e
			}
		}
	}
	s.fill, s.comp, s.rx, s.tx, s.umem = ring[uint64]{}, ring[uint64]{}, ring[Desc]{}, ring[Desc]{}, nil
	if err != nil {
		return fmt.Errorf("xsk: close: %w", err)
	}
	return nil
}

// RxPending reports whether the kernel has put descriptors on the RX ring
// that are not consumed yet. It reads only the ring's shared indices, so
// any goroutine may call it while the socket is open.
func (s *Socket) RxPending() bool {
	return atomic.LoadUint32(s.rx.producer) != atomic.LoadUint32(s.rx.consumer)
}
