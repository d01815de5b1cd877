package link

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// MemOptions configure a MemPair. The zero value is a perfect link.
type MemOptions struct {
	// MaxPayload is the datagram size limit; 0 means 1472, a UDP payload
	// on a 1500-byte Ethernet MTU.
	MaxPayload int
	// Loss, Reorder and Duplicate are the probabilities, in [0, 1], that a
	// sent datagram is dropped, delivered after the ones flushed with or
	// after it, or delivered twice.
	Loss, Reorder, Duplicate float64
	// Seed makes the impairments repeatable: the same seed and the same
	// sequence of sends give the same losses.
	Seed uint64
	// Queue bounds each end's undelivered datagrams, like a NIC's receive
	// ring: beyond it datagrams are dropped. 0 means 4096.
	Queue int
}

// MemLink is one end of an in-memory link made by MemPair: datagrams
// queued on one end arrive at the other, impaired as configured. It lets
// the protocol be tested deterministically without a network.
type MemLink struct {
	opts  MemOptions
	addr  netip.AddrPort
	peer  *MemLink
	pool  *memPool
	rng   *rand.Rand // used by Flush only, on the owning goroutine
	timer *time.Timer

	cur   []byte
	batch []memPacket // queued by Queue, sent by Flush
	held  []memPacket // reordered, sent with the next Flush

	mu     sync.Mutex
	inbox  []memPacket // guarded by mu
	lent   []memPacket // returned by the last Receive; owned by the reader
	wake   chan struct{}
	closed atomic.Bool

	// Counters of what the impairments did, for tests.
	Dropped, Reordered, Duplicated atomic.Uint64
}

type memPacket struct {
	buf  []byte
	n    int
	from netip.AddrPort
}

// memPool recycles datagram buffers between the two ends.
type memPool struct {
	mu   sync.Mutex
	free [][]byte
	size int
}

func (p *memPool) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return make([]byte, p.size)
}

func (p *memPool) put(b []byte) {
	p.mu.Lock()
	p.free = append(p.free, b)
	p.mu.Unlock()
}

// MemPair returns the two ends of an in-memory link, addressed a and b.
func MemPair(a, b netip.AddrPort, opts MemOptions) (*MemLink, *MemLink) {
	if opts.MaxPayload <= 0 {
		opts.MaxPayload = 1472
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	pool := &memPool{size: opts.MaxPayload}
	x := &MemLink{opts: opts, addr: a, pool: pool, rng: rand.New(rand.NewPCG(opts.Seed, 1)), wake: make(chan struct{}, 1)}
	y := &MemLink{opts: opts, addr: b, pool: pool, rng: rand.New(rand.NewPCG(opts.Seed, 2)), wake: make(chan struct{}, 1)}
	x.peer, y.peer = y, x
	return x, y
}

// MaxPayload implements Link.
func (l *MemLink) MaxPayload() int { return l.opts.MaxPayload }

// LocalAddr implements Link.
func (l *MemLink) LocalAddr() netip.AddrPort { return l.addr }

// TxBuffer implements Link.
func (l *MemLink) TxBuffer() []byte {
	if l.cur == nil {
		l.cur = l.pool.get()
	}
	return l.cur
}

// Queue implements Link. A MemLink has one peer, so to is not consulted.
func (l *MemLink) Queue(n int, to netip.AddrPort) {
	l.batch = append(l.batch, memPacket{buf: l.cur, n: n, from: l.addr})
	l.cur = nil
}

// Flush implements Link: it applies the impairments and moves the batch
// into the peer's inbox.
func (l *MemLink) Flush() error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	if len(l.batch) == 0 && len(l.held) == 0 {
		return nil
	}
	held := len(l.held) // packets held by earlier flushes go out after this batch
	p := l.peer
	p.mu.Lock()
	for _, pk := range l.batch {
		switch {
		case l.chance(l.opts.Loss):
			l.Dropped.Add(1)
			l.pool.put(pk.buf)
		case l.chance(l.opts.Reorder):
			l.Reordered.Add(1)
			l.held = append(l.held, pk)
		default:
			if l.chance(l.opts.Duplicate) {
				l.Duplicated.Add(1)
				d := l.pool.get()
				copy(d, pk.buf[:pk.n])
				p.deliverLocked(memPacket{buf: d, n: pk.n, from: pk.from})
			}
			p.deliverLocked(pk)
		}
	}
	for _, pk := range l.held[:held] {
		p.deliverLocked(pk)
	}
	n := copy(l.held, l.held[held:])
	l.held = l.held[:n]
	p.mu.Unlock()
	l.batch = l.batch[:0]
	p.Wake()
	if n > 0 {
		// Have the owner flush again soon rather than sleep on them: a
		// reordered datagram arrives a little late, not a timeout late.
		l.Wake()
	}
	return nil
}

func (l *MemLink) chance(p float64) bool { return p > 0 && l.rng.Float64() < p }

// deliverLocked appends pk to l's inbox, or drops it when the inbox is
// full or l is closed. l.mu is held.
func (l *MemLink) deliverLocked(pk memPacket) {
	if len(l.inbox) >= l.opts.Queue || l.closed.Load() {
		l.Dropped.Add(1)
		l.pool.put(pk.buf)
		return
	}
	l.inbox = append(l.inbox, pk)
}

// Receive implements Link.
func (l *MemLink) Receive(pkts []Datagram) (int, error) {
	for _, pk := range l.lent {
		l.pool.put(pk.buf)
	}
	l.lent = l.lent[:0]
	if l.closed.Load() {
		return 0, ErrLinkClosed
	}
	l.mu.Lock()
	n := min(len(pkts), len(l.inbox))
	l.lent = append(l.lent, l.inbox[:n]...)
	rest := copy(l.inbox, l.inbox[n:])
	clear(l.inbox[rest:])
	l.inbox = l.inbox[:rest]
	l.mu.Unlock()
	for i, pk := range l.lent {
		pkts[i] = Datagram{Data: pk.buf[:pk.n], From: pk.from}
	}
	return n, nil
}

// Pending reports whether a datagram waits in the link's inbox; safe for
// concurrent use.
func (l *MemLink) Pending() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.inbox) > 0
}

// Wait implements Link.
func (l *MemLink) Wait(d time.Duration) error {
	if l.closed.Load() {
		return ErrLinkClosed
	}
	l.mu.Lock()
	ready := len(l.inbox) > 0
	l.mu.Unlock()
	if ready || d == 0 {
		return nil
	}
	if d < 0 {
		<-l.wake
		return nil
	}
	if l.timer == nil {
		l.timer = time.NewTimer(d)
	} else {
		l.timer.Reset(d)
	}
	select {
	case <-l.wake:
		l.timer.Stop()
	case <-l.timer.C:
	}
	return nil
}

// Wake implements Link.
func (l *MemLink) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close implements Link. Datagrams sent to a closed end are dropped.
func (l *MemLink) Close() error {
	l.closed.Store(true)
	l.Wake()
	return nil
}
