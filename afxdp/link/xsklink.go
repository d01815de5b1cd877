package link

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/internal/packet"
	"github.com/starwire/starwire/internal/xsk"
	"github.com/starwire/starwire/xdp"
)

// XSKOptions configure OpenXSK.
type XSKOptions struct {
	// Port is the UDP port this link owns: the steering program sends
	// IPv4/UDP packets to it into the AF_XDP sockets and passes everything
	// else to the kernel. Required.
	Port uint16
	// Queues are the RX queues to bind a socket to; nil means every queue
	// of the device, so nothing steered is missed whichever queue the
	// device hashes it to.
	Queues []int
	// FrameSize and NumFrames size each socket's UMEM (see package xsk);
	// zero means 2048 and 4096.
	FrameSize, NumFrames int
	// ZeroCopy requires zero-copy binding; by default the kernel picks
	// (veth offers only copy mode).
	ZeroCopy bool
	// XDPMode is how the steering program attaches; zero means generic
	// (skb) mode, which measured lower latency than native on veth.
	XDPMode xdp.Mode
	// Pcap, when set, receives a pcap capture (Ethernet frames) of every
	// packet the link sends and receives, written by the reactor: give it
	// a bufio.Writer and flush that after Close. For debugging, not speed.
	Pcap io.Writer
	// Allow, when not empty, lists the only peers whose packets the
	// steering program lets through to the sockets; others are dropped
	// in XDP and counted (xdp.Counters.NotAllowed).
	Allow []netip.Addr
	// Loss is fault injection for tests of the reliable protocol: the
	// fraction of steered packets the steering program drops on receive
	// (xdp.Options.Loss), since AF_XDP traffic bypasses netem. Zero, the
	// default, loads the program without impairment code.
	Loss float64
}

// XSKLink is a Link over AF_XDP sockets bound to the queues of one
// interface. It writes Ethernet, IPv4 and UDP headers, with valid
// checksums, in place in UMEM frames, so it interoperates with a plain UDP
// socket on the peer (UDPLink). Peers' MAC addresses come from received
// frames and from the kernel's neighbour table, which Resolve fills by
// sending a datagram through the kernel when an address is missing.
//
// Every socket receives; the socket of the first queue transmits. The
// reactor owns the sockets; Resolve and Wake may run on other goroutines.
type XSKLink struct {
	ifindex int
	ifname  string
	mac     [6]byte
	local   netip.AddrPort
	maxPay  int
	sh      *xskShared // the steering program, shared with sibling links
	socks   []*xsk.Socket
	queues  []int
	poll    *poller
	watch   *linkWatch // the interface going down or away stops the link
	// resMu is held by resolutions while they use nl and probeFD, and by
	// Close while it closes them.
	resMu   sync.RWMutex
	nl      *netlink.Handle // bound to the interface's namespace at open
	probeFD int             // kernel UDP socket whose sends trigger ARP
	pcap    *pcapgo.Writer
	closed  atomic.Bool

	macMu     sync.RWMutex
	macs      map[netip.Addr][6]byte // peers' (or their gateway's) MACs
	resolving map[netip.Addr]bool
	// Reactor-local copies of what macs holds for the peers the reactor
	// met, and the last one, so that steady traffic with many peers takes
	// no lock (macMu) per packet.
	seen    map[netip.Addr][6]byte
	lastIP  netip.Addr
	lastMAC [6]byte

	cur    uint64 // frame lent by TxBuffer, or noFrame
	txq    []xsk.Desc
	rxd    []xsk.Desc
	lent   []lentFrame // frames returned by the last Receive
	ipID   uint16
	txHdr  packet.UDP4
	rxNext int // socket to read first, for fairness

	rxCount []atomic.Uint64 // datagrams received per socket

	// Counters for tests and stats; written by the reactor.
	TxDropped, RxForeign, NoMAC atomic.Uint64

	lostFrames int // see LostFrames
}

// Received returns how many datagrams each bound queue delivered, in the
// order of Queues.
func (l *XSKLink) Received() []uint64 {
	out := make([]uint64, len(l.rxCount))
	for i := range l.rxCount {
		out[i] = l.rxCount[i].Load()
	}
	return out
}

// Queues returns the queues the link has a socket on.
func (l *XSKLink) Queues() []int { return l.queues }

type lentFrame struct {
	sock int
	addr uint64
}

const noFrame = ^uint64(0)

// rxHeadroom is where copy mode places a received packet in its chunk.
const rxHeadroom = 256

// OpenXSK attaches the steering program to ifname and binds an AF_XDP
// socket to each of its queues. It runs in the calling thread's network
// namespace. Errors that mean AF_XDP cannot be used here wrap
// ErrUnavailable, so a caller can fall back to UDPLink or TCP.
func OpenXSK(ifname string, opts XSKOptions) (*XSKLink, error) {
	links, err := OpenXSKLinks(ifname, opts, 1)
	if err != nil {
		return nil, err
	}
	return links[0], nil
}

// OpenXSKLinks is OpenXSK for n reactors: it returns up to n links (never
// more than the queues) sharing one steering program, link k owning the
// sockets of entries k, k+n, k+2n, ... of opts.Queues (queues k, k+n,
// ... when it is nil). The program stays attached until the last link
// closes. All links use opts.Port; a Group runs an
// Endpoint on each and forwards packets that arrive on another reactor's
// queue.
func OpenXSKLinks(ifname string, opts XSKOptions, n int) (_ []*XSKLink, err error) {
	if opts.Port == 0 {
		return nil, fmt.Errorf("afxdp: open %s: no port", ifname)
	}
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("afxdp: open %s: netlink: %w: %w", ifname, err, ErrUnavailable)
	}
	info, err := inspect(nl, ifname)
	nl.Close()
	if err != nil {
		return nil, err
	}
	if opts.FrameSize == 0 {
		opts.FrameSize = xsk.DefaultFrameSize
	}
	queues := opts.Queues
	if len(queues) == 0 {
		for q := range max(info.queues, 1) {
			queues = append(queues, q)
		}
	}
	n = max(1, min(n, len(queues)))
	maxQ := 0
	for _, q := range queues {
		maxQ = max(maxQ, q+1)
	}
	sh := &xskShared{}
	if sh.prog, err = xdp.Load(xdp.Options{Ports: []uint16{opts.Port}, Queues: max(maxQ, xdp.DefaultQueues), Allow: opts.Allow, Loss: opts.Loss}); err != nil {
		return nil, fmt.Errorf("afxdp: open %s: %w: %w", ifname, err, ErrUnavailable)
	}
	var links []*XSKLink
	defer func() {
		if err != nil {
			for _, l := range links {
				l.Close()
			}
			if len(links) == 0 {
				sh.prog.Close()
			}
		}
	}()
	mode := opts.XDPMode
	if mode == xdp.ModeAuto {
		mode = xdp.ModeGeneric
	}
	if _, err := sh.prog.AttachMode(info.index, mode); err != nil {
		return nil, fmt.Errorf("afxdp: open %s: %w: %w", ifname, err, ErrUnavailable)
	}
	for k := range n {
		var mine []int
		for i, q := range queues {
			if i%n == k {
				mine = append(mine, q)
			}
		}
		sh.refs.Add(1)
		l, err := openLink(ifname, info, opts, mine, sh)
		if err != nil {
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

// xskShared is the steering program the links of one interface share.
type xskShared struct {
	prog *xdp.Program
	refs atomic.Int32
}

func (sh *xskShared) release() error {
	if sh.refs.Add(-1) == 0 {
		return sh.prog.Close()
	}
	return nil
}

// openLink binds sockets to queues and registers them with the shared
// program. On error it releases what it took, including its reference.
func openLink(ifname string, info ifaceInfo, opts XSKOptions, queues []int, sh *xskShared) (_ *XSKLink, err error) {
	l := &XSKLink{ifname: ifname, sh: sh, probeFD: -1, cur: noFrame,
		macs: make(map[netip.Addr][6]byte), resolving: make(map[netip.Addr]bool), seen: make(map[netip.Addr][6]byte)}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		return nil, fmt.Errorf("afxdp: open %s: netlink: %w: %w", ifname, err, ErrUnavailable)
	}
	l.ifindex, l.mac, l.local = info.index, info.mac, netip.AddrPortFrom(info.addr, opts.Port)
	l.maxPay = min(info.mtu-packet.IPv4Len-packet.UDPLen, opts.FrameSize-rxHeadroom-packet.UDP4HeaderLen)
	cfg := xsk.Config{FrameSize: opts.FrameSize, NumFrames: opts.NumFrames}
	if opts.ZeroCopy {
		cfg.Mode = xsk.ModeZeroCopy
	}
	var fds []int
	for _, q := range queues {
		s, err := xsk.Open(l.ifindex, q, cfg)
		if err != nil {
			return nil, fmt.Errorf("afxdp: open %s queue %d: %w: %w", ifname, q, err, ErrUnavailable)
		}
		l.socks = append(l.socks, s)
		l.queues = append(l.queues, q)
		if err := l.sh.prog.RegisterSocket(q, s.FD()); err != nil {
			return nil, fmt.Errorf("afxdp: open %s: %w", ifname, err)
		}
		fds = append(fds, s.FD())
	}
	l.rxCount = make([]atomic.Uint64, len(l.socks))
	if l.poll, err = newPoller(fds...); err != nil {
		return nil, err
	}
	if l.watch, err = watchLink(l.ifindex, l.Wake); err != nil {
		return nil, err
	}
	if l.probeFD, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("afxdp: open %s: probe socket: %w", ifname, err)
	}
	if opts.Pcap != nil {
		l.pcap = pcapgo.NewWriter(opts.Pcap)
		if err := l.pcap.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
			return nil, fmt.Errorf("afxdp: open %s: pcap: %w", ifname, err)
		}
	}
	l.txHdr = packet.UDP4{SrcMAC: l.mac, SrcIP: info.addr.As4(), SrcPort: opts.Port}
	l.txq = make([]xsk.Desc, 0, 64)
	l.rxd = make([]xsk.Desc, 64)
	return l, nil
}

// ifaceInfo is what OpenXSK and Available need to know of an interface.
type ifaceInfo struct {
	index, mtu, queues int
	mac                [6]byte
	addr               netip.Addr
	xdpAttached        bool
	up                 bool
}

func inspect(nl *netlink.Handle, ifname string) (ifaceInfo, error) {
	var info ifaceInfo
	lk, err := nl.LinkByName(ifname)
	if err != nil {
		return info, fmt.Errorf("afxdp: interface %s: %w: %w", ifname, err, ErrUnavailable)
	}
	a := lk.Attrs()
	info.index, info.mtu, info.queues = a.Index, a.MTU, rxQueuesInUse(ifname, a.NumRxQueues)
	info.up = a.Flags&net.FlagUp != 0
	info.xdpAttached = a.Xdp != nil && a.Xdp.Attached
	if len(a.HardwareAddr) != 6 {
		return info, fmt.Errorf("afxdp: interface %s has no Ethernet address: %w", ifname, ErrUnavailable)
	}
	copy(info.mac[:], a.HardwareAddr)
	addrs, err := nl.AddrList(lk, netlink.FAMILY_V4)
	if err != nil || len(addrs) == 0 {
		return info, fmt.Errorf("afxdp: interface %s has no IPv4 address: %w", ifname, ErrUnavailable)
	}
	info.addr, _ = netip.AddrFromSlice(addrs[0].IP.To4())
	return info, nil
}

// Available reports why AF_XDP cannot be used on ifname, in the calling
// thread's namespace, or nil when it can: the interface must exist, be up,
// have an Ethernet and an IPv4 address and no foreign XDP program, and the
// process must be able to create AF_XDP sockets and load XDP programs. It
// attaches nothing. Errors wrap ErrUnavailable.
func Available(ifname string) error {
	_, err := available(ifname)
	return err
}

// AvailableQueues is Available that also returns how many queues ifname
// has (0 when its driver does not say), for the number of reactors to run.
func AvailableQueues(ifname string) (int, error) {
	info, err := available(ifname)
	return info.queues, err
}

// available is Available that also returns what it learnt of ifname.
func available(ifname string) (ifaceInfo, error) {
	nl, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return ifaceInfo{}, fmt.Errorf("afxdp: netlink: %w: %w", err, ErrUnavailable)
	}
	defer nl.Close()
	info, err := inspect(nl, ifname)
	if err != nil {
		return info, err
	}
	if !info.up {
		return info, fmt.Errorf("afxdp: interface %s is down: %w", ifname, ErrUnavailable)
	}
	if info.xdpAttached {
		return info, fmt.Errorf("afxdp: interface %s already runs an XDP program: %w", ifname, ErrUnavailable)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return info, fmt.Errorf("afxdp: AF_XDP socket (kernel support or CAP_NET_RAW): %w: %w", err, ErrUnavailable)
	}
	unix.Close(fd)
	prog, err := xdp.Load(xdp.Options{Ports: []uint16{1}, Queues: 1})
	if err != nil {
		return info, fmt.Errorf("afxdp: load XDP program (CAP_BPF): %w: %w", err, ErrUnavailable)
	}
	prog.Close()
	return info, nil
}

// MaxPayload implements Link.
func (l *XSKLink) MaxPayload() int { return l.maxPay }

// LocalAddr implements Link.
func (l *XSKLink) LocalAddr() netip.AddrPort { return l.local }

// Program returns the attached steering program (for its counters).
func (l *XSKLink) Program() *xdp.Program { return l.sh.prog }

// Sockets returns the AF_XDP sockets, one per bound queue.
func (l *XSKLink) Sockets() []*xsk.Socket { return l.socks }

// TxBuffer implements Link: the room is the UDP payload area of a UMEM
// frame of the transmitting socket.
func (l *XSKLink) TxBuffer() []byte {
	if l.closed.Load() {
		return nil
	}
	s := l.socks[0]
	if l.cur == noFrame {
		addr, ok := s.AllocFrame()
		if !ok {
			l.Flush()
			s.ReapCompletions()
			if addr, ok = s.AllocFrame(); !ok {
				return nil
			}
		}
		l.cur = addr
	}
	f := s.Frame(l.cur)
	return f[packet.UDP4HeaderLen : packet.UDP4HeaderLen+l.maxPay]
}

// Queue implements Link. A datagram to a peer whose MAC address is not
// known yet is dropped (the protocol resends it) and resolution starts.
func (l *XSKLink) Queue(n int, to netip.AddrPort) {
	s := l.socks[0]
	addr := l.cur
	l.cur = noFrame
	mac, ok := l.lookup(to.Addr())
	if !ok {
		s.FreeFrame(addr)
		l.NoMAC.Add(1)
		l.resolveInBackground(to)
		return
	}
	h := &l.txHdr
	h.DstMAC, h.DstIP, h.DstPort = mac, to.Addr().As4(), to.Port()
	l.ipID++
	h.ID = l.ipID
	f := s.Frame(addr)
	size, err := packet.WriteUDP4(f, h, n)
	if err != nil {
		s.FreeFrame(addr)
		l.TxDropped.Add(1)
		return
	}
	if l.pcap != nil {
		l.dump(f[:size])
	}
	l.txq = append(l.txq, xsk.Desc{Addr: addr, Len: uint32(size)})
	if len(l.txq) == cap(l.txq) {
		l.Flush()
	}
}

func (l *XSKLink) dump(frame []byte) {
	ci := gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: len(frame), Length: len(frame)}
	l.pcap.WritePacket(ci, frame)
}

// Flush implements Link: the queued frames go on the TX ring and the kernel
// is kicked until it has taken them (copy mode needs a kick per batch).
func (l *XSKLink) Flush() error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	s := l.socks[0]
	q := l.txq
	for round := 0; len(q) > 0; round++ {
		n := s.Transmit(q)
		q = q[n:]
		if err := s.Kick(); err != nil && !errors.Is(err, xsk.ErrTxStalled) {
			l.dropTx(q)
			if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENETDOWN) {
				// The socket was unbound: its interface is gone.
				return fmt.Errorf("afxdp: flush %s: %w: %w", l.ifname, ErrLinkDown, err)
			}
			return fmt.Errorf("afxdp: flush %s: %w", l.ifname, err)
		}
		s.ReapCompletions()
		if round == 16 && len(q) > 0 {
			l.dropTx(q) // the ring stays full: drop, the protocol resends
			break
		}
	}
	l.txq = l.txq[:0]
	s.ReapCompletions()
	return nil
}

func (l *XSKLink) dropTx(q []xsk.Desc) {
	for _, d := range q {
		l.socks[0].FreeFrame(d.Addr)
	}
	l.TxDropped.Add(uint64(len(q)))
	l.txq = l.txq[:0]
}

// Receive implements Link. Frames of the previous batch go back to the fill
// rings first.
func (l *XSKLink) Receive(pkts []Datagram) (int, error) {
	if l.closed.Load() {
		return 0, ErrLinkClosed
	}
	if down, why := l.watch.Down(); down {
		return 0, fmt.Errorf("afxdp: %s: %s: %w", l.ifname, why, ErrLinkDown)
	}
	for _, f := range l.lent {
		l.socks[f.sock].FreeFrame(f.addr)
	}
	l.lent = l.lent[:0]
	k := 0
	for i := range l.socks {
		si := (l.rxNext + i) % len(l.socks)
		s := l.socks[si]
		s.RefillFill()
		if s.FillNeedsWakeup() {
			s.WakeRx()
		}
		room := min(len(pkts)-k, len(l.rxd))
		if room == 0 {
			break
		}
		n := s.Receive(l.rxd[:room])
		if n > 0 {
			l.rxCount[si].Add(uint64(n))
		}
		for _, d := range l.rxd[:n] {
			frame := s.Packet(d)
			h, payload, err := packet.ParseUDP4(frame)
			if err != nil || h.DstPort != l.local.Port() {
				s.FreeFrame(d.Addr)
				l.RxForeign.Add(1)
				continue
			}
			if l.pcap != nil {
				l.dump(frame)
			}
			from := netip.AddrPortFrom(netip.AddrFrom4(h.SrcIP), h.SrcPort)
			l.learn(from.Addr(), h.SrcMAC)
			pkts[k] = Datagram{Data: payload, From: from}
			l.lent = append(l.lent, lentFrame{sock: si, addr: d.Addr})
			k++
		}
	}
	l.rxNext++
	return k, nil
}

// learn records the MAC address a peer's frames come from. It takes
// macMu only when the address is new or changed.
func (l *XSKLink) learn(ip netip.Addr, mac [6]byte) {
	if ip == l.lastIP && mac == l.lastMAC {
		return
	}
	l.lastIP, l.lastMAC = ip, mac
	if old, ok := l.seen[ip]; ok && old == mac {
		return
	}
	l.seen[ip] = mac
	l.macMu.Lock()
	l.macs[ip] = mac
	l.macMu.Unlock()
}

// lookup returns the MAC address frames to ip go to, if known; it runs on
// the reactor and takes macMu only for a peer it has not met yet (one
// Resolve may have found).
func (l *XSKLink) lookup(ip netip.Addr) ([6]byte, bool) {
	if ip == l.lastIP {
		return l.lastMAC, true
	}
	mac, ok := l.seen[ip]
	if !ok {
		if mac, ok = l.lookup2(ip); !ok {
			return mac, false
		}
		l.seen[ip] = mac
	}
	l.lastIP, l.lastMAC = ip, mac
	return mac, true
}

// Pending reports whether a datagram waits on one of the link's RX rings,
// without a system call. Another goroutine than the link's driver may call
// it, but only while the link is open (the rings are unmapped on Close).
func (l *XSKLink) Pending() bool {
	for _, s := range l.socks {
		if s.RxPending() {
			return true
		}
	}
	return false
}

// Wait implements Link.
func (l *XSKLink) Wait(d time.Duration) error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	return l.poll.wait(d)
}

// Wake implements Link.
func (l *XSKLink) Wake() {
	if !l.closed.Load() {
		l.poll.wake()
	}
}

// LostFrames returns how many UMEM frames, when the link closed, were
// neither free, nor in a ring, nor held by the link: 0 unless a frame
// leaked. (A packet the kernel was moving between two rings at that very
// moment would count too; a link closes after its reactor stopped.)
func (l *XSKLink) LostFrames() int { return l.lostFrames }

// unaccounted counts the frames of the sockets' UMEMs that are nowhere.
func (l *XSKLink) unaccounted() int {
	n := len(l.lent) + len(l.txq)
	if l.cur != noFrame {
		n++
	}
	for _, s := range l.socks {
		n += s.FreeFrames() + s.RingFrames() - s.NumFrames()
	}
	return -n
}

// Close implements Link: it takes its sockets out of the steering program,
// detaches the program if no other link of the interface uses it (the
// interface's traffic all goes to the kernel again), and closes the sockets.
func (l *XSKLink) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	l.lostFrames = l.unaccounted()
	var errs []error
	for _, q := range l.queues {
		errs = append(errs, l.sh.prog.UnregisterSocket(q))
	}
	errs = append(errs, l.sh.release())
	for _, s := range l.socks {
		errs = append(errs, s.Close())
	}
	if l.poll != nil {
		errs = append(errs, l.poll.close())
	}
	if l.watch != nil {
		errs = append(errs, l.watch.close())
	}
	l.resMu.Lock() // wait for resolutions in progress on other goroutines
	if l.probeFD >= 0 {
		errs = append(errs, unix.Close(l.probeFD))
		l.probeFD = -1
	}
	if l.nl != nil {
		l.nl.Close()
	}
	l.resMu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("afxdp: close %s: %w", l.ifname, err)
	}
	return nil
}
