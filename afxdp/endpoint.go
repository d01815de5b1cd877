package afxdp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/wire"
)

// An Endpoint runs the reliable packet protocol over one Link: it dials and
// accepts sessions, and each session is a Conn. One goroutine, the reactor,
// owns the link, every session's state and every timer; other goroutines
// reach it only through Send, Close and Dial, which queue work and wake it.
//
// The reactor receives a batch, lands in-order data in its frames'
// destinations, takes queued messages, transmits what the windows allow,
// acknowledges, and flushes the link in one batch. When a loop finds no
// work it keeps polling for Options.Spin and then sleeps in the link's Wait
// until a packet, a wake-up or the next timer.
//
// The receiver's Alloc runs on the reactor, so that tensor bytes land in
// place as packets arrive, and so, by default, does Deliver: a quick
// handler answers within the same reactor loop, its answer carrying the
// acknowledgement. Receivers that may block set Options.BlockingReceiver,
// and their frames are delivered from the Conn's Receive goroutine.
type Endpoint struct {
	link    Link
	opts    Options
	dataLen int    // frame bytes per packet
	group   *Group // nil unless one of a Group's endpoints
	inbox   inbox  // packets forwarded by the group's other reactors

	loop       sync.Mutex // held by whoever runs the reactor's work
	mu         sync.Mutex
	ready      []*session // sessions with work queued by other goroutines
	readyNext  []*session
	readyFlag  atomic.Bool
	sleeping   atomic.Bool
	stopping   atomic.Bool
	linkClosed atomic.Bool
	done       chan struct{}
	accepts    chan *Conn

	// Owned by the reactor.
	sessions map[sessionKey]*session
	list     []*session
	acks     []*session
	rx       []Datagram
	now      time.Time

	// The session bounds, shared by a Group's endpoints, and the
	// half-open sessions (sessions.go).
	caps     *sessionCaps
	half     map[sessionKey]*halfOpen
	halfList []*halfOpen // the same, in the order they came
	halfNext time.Time   // when halfTimers next has work

	// Receive memory (budget.go): its account, the buffers of packets
	// held past gaps, and the sessions shut for lack of it, tried again
	// when some is released.
	mem                        memory
	ooo                        oooPool
	memWaiters, memWaitersNext []*session

	// streamUntil is when the reactor may sleep again after a packet
	// that left a frame partly received (Options.FrameSpin).
	streamUntil time.Time
	epoch       time.Time // origin of the sessions' send times
	err         error     // why the reactor stopped; read after done

	ctr       counters
	unflushed int        // packets queued since the last flush
	poll      *pollClaim // what busy polling was granted (polling.go)
}

const (
	rxBatch     = 64
	pumpBudget  = 64 // packets a session transmits per reactor loop
	dialTimeout = 3 * time.Second
	// ackPacketTime bounds how long an acknowledgement owed for a packet
	// mid-frame waits, per packet of Options.AckEvery: the time a packet
	// takes on the slowest link this is made for (1500 bytes at 1 Gb/s).
	ackPacketTime = 12 * time.Microsecond
)

// NewEndpoint starts a reactor on link. The Endpoint owns the link from now
// on and closes it in Close.
func NewEndpoint(link Link, opts Options) *Endpoint {
	return newEndpoint(link, opts.withDefaults(), nil)
}

func newEndpoint(link Link, opts Options, g *Group) *Endpoint {
	e := &Endpoint{
		link: link, opts: opts, group: g,
		dataLen:  link.MaxPayload() - HeaderLen,
		mem:      memory{limit: opts.EndpointMemory},
		epoch:    time.Now(),
		done:     make(chan struct{}),
		sessions: make(map[sessionKey]*session),
		half:     make(map[sessionKey]*halfOpen),
		rx:       make([]Datagram, rxBatch),
	}
	e.opts, e.poll = claimPolling(opts)
	e.ooo.e = e
	if g != nil {
		e.accepts, e.caps = g.accepts, g.caps
	} else {
		e.accepts, e.caps = make(chan *Conn, max(opts.Backlog, 0)), newSessionCaps(&opts)
	}
	ready := make(chan struct{})
	go e.run(ready)
	<-ready
	return e
}

// maxAckDelay is the longest a peer of the same options holds an
// acknowledgement back: a frame's completion waits AckDelay, packets of a
// frame still arriving AckEvery packet times.
func (e *Endpoint) maxAckDelay() time.Duration {
	return max(e.opts.AckDelay, time.Duration(e.opts.AckEvery)*ackPacketTime)
}

// Addr is the address peers dial to reach this endpoint.
func (e *Endpoint) Addr() netip.AddrPort { return e.link.LocalAddr() }

// Link returns the endpoint's link.
func (e *Endpoint) Link() Link { return e.link }

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	st := e.ctr.stats()
	st.Buffered = uint64(max(e.mem.used.Load()+e.mem.held.Load(), 0))
	return st
}

// resolver is implemented by links that must learn something about a peer
// (its MAC address) before sending to it, which may block.
type resolver interface {
	Resolve(ctx context.Context, peer netip.AddrPort) error
}

// Dial opens a session with the endpoint at addr ("ip:port"). Without a
// deadline in ctx it gives up after 3s.
func (e *Endpoint) Dial(ctx context.Context, addr string) (*Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		ua, rerr := net.ResolveUDPAddr("udp4", addr)
		if rerr != nil {
			return nil, fmt.Errorf("afxdp: dial %s: %w", addr, rerr)
		}
		ap = ua.AddrPort()
	}
	return e.DialAddr(ctx, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
}

// DialAddr is Dial with a parsed address.
func (e *Endpoint) DialAddr(ctx context.Context, peer netip.AddrPort) (*Conn, error) {
	if e.stopping.Load() {
		err := ErrClosed
		select {
		case <-e.done:
			err = e.stoppedErr()
		default: // stopping: the reason is not known yet
		}
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialTimeout)
		defer cancel()
	}
	if r, ok := e.link.(resolver); ok {
		if err := r.Resolve(ctx, peer); err != nil {
			return nil, fmt.Errorf("afxdp: dial %v: %w", peer, err)
		}
	}
	s := e.newSession(sessionKey{peer: peer, id: rand.Uint64()})
	s.opening = true
	s.openWait = max(e.opts.RTO, 10*time.Millisecond)
	s.openDone = make(chan error, 1)
	e.enqueue(s)
	select {
	case err := <-s.openDone:
		if err != nil {
			return nil, fmt.Errorf("afxdp: dial %v: %w", peer, err)
		}
		return s.conn, nil
	case <-ctx.Done():
		s.conn.Close()
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, ctx.Err())
	case <-e.done:
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, e.stoppedErr())
	}
}

// Accept waits for a session a peer dialed.
func (e *Endpoint) Accept() (*Conn, error) { return e.AcceptContext(context.Background()) }

// AcceptContext is Accept that also gives up when ctx ends.
func (e *Endpoint) AcceptContext(ctx context.Context) (*Conn, error) {
	select {
	case c := <-e.accepts:
		return c, nil
	case <-e.done:
		return nil, fmt.Errorf("afxdp: accept on %v: %w", e.Addr(), e.stoppedErr())
	case <-ctx.Done():
		return nil, fmt.Errorf("afxdp: accept on %v: %w", e.Addr(), ctx.Err())
	}
}

// stoppedErr says why the reactor stopped: ErrClosed, wrapping the link's
// error when one stopped it. Call it after done is closed.
func (e *Endpoint) stoppedErr() error {
	if e.err != nil {
		return fmt.Errorf("%w: %w", ErrClosed, e.err)
	}
	return ErrClosed
}

// Close stops the reactor: every session ends with ErrClosed (its peer is
// told), and the link is closed, also when the reactor had stopped on its
// own (the link failed). Only the first call reports the link's error.
func (e *Endpoint) Close() error {
	e.stopping.Store(true)
	e.link.Wake()
	<-e.done
	if e.linkClosed.Swap(true) {
		return nil
	}
	return e.link.Close()
}

func (e *Endpoint) newSession(key sessionKey) *session {
	s := &session{ep: e, key: key, dataLen: e.dataLen, limit: 64, peerWnd: 64,
		slots: make([]sendSlot, e.opts.Window)}
	s.rack.init(&e.opts)
	s.conn = &Conn{s: s, onReactor: !e.opts.BlockingReceiver, deliveries: make(chan *wire.Inbound, max(e.opts.Deliveries, maxPacked(e.dataLen))), done: make(chan struct{})}
	return s
}

// enqueue hands s to the reactor, waking it if it sleeps. Seen together
// with the reactor's check of readyFlag after setting sleeping, the two
// sequentially consistent flags guarantee no wake-up is lost.
func (e *Endpoint) enqueue(s *session) {
	e.mu.Lock()
	e.ready = append(e.ready, s)
	e.mu.Unlock()
	e.readyFlag.Store(true)
	if !e.sleeping.Load() {
		return
	}
	// The reactor is parked: rather than wake it and wait for the
	// scheduler to run it, send from this goroutine, which saves a
	// hand-off on the latency path of a call.
	// Yield once first, so that callers made runnable alongside this one
	// queue their messages too and leave in the same batch (one kick).
	runtime.Gosched()
	if e.sleeping.Load() && e.loop.TryLock() {
		more := false
		if e.sleeping.Load() && !e.stopping.Load() {
			e.now = time.Now()
			e.takeReady()
			_, more = e.pumpAll()
			e.flushAcks()
			if err := e.flush(); err != nil {
				// As in run: the datagrams are resent; a closed link
				// stops the reactor when it next flushes.
				e.ctr.sendErrors.Add(1)
			}
		}
		e.loop.Unlock()
		if !more {
			return
		}
	}
	e.link.Wake()
}

func (e *Endpoint) run(ready chan<- struct{}) {
	defer close(e.done)
	// A pinned reactor keeps its thread, which ends with the goroutine.
	// An unpinned one does not lock it: a locked goroutine that parks or
	// yields costs a thread hand-off each time, which measured worse than
	// letting the scheduler run it anywhere.
	if e.opts.Pin {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(e.opts.CPU)                // one of the affinity mask's (claimPolling)
		_ = unix.SchedSetaffinity(0, &set) // best effort: the reactor works unpinned too
	}
	close(ready)
	// The loop lock is held except while parked; a sender that finds the
	// reactor parked takes it and transmits itself (see enqueue). After
	// shutdown it is never released, so late senders just queue.
	e.loop.Lock()
	var idleAt time.Time
	for !e.stopping.Load() {
		e.now = time.Now()
		n, err := e.link.Receive(e.rx)
		if err != nil {
			e.err = fmt.Errorf("afxdp: receive on %v: %w", e.link.LocalAddr(), err)
			break
		}
		for i := range n {
			e.handle(&e.rx[i])
		}
		e.ctr.received.Add(uint64(n))
		if n > 0 {
			// Callers woken by what this batch delivered wait in this
			// thread's run queue: yielding runs them here now instead of
			// waking another thread for them, which costs more than the
			// call itself on a VM. Yielding before transmitting lets
			// their next requests carry the acknowledgements this batch
			// owes, which then need no packet (and no kick) of their own.
			// A busy reactor yields too: never yielding, it left them
			// waiting for the scheduler's 10ms preemption whenever every
			// P ran a reactor.
			runtime.Gosched()
		}
		worked := n > 0
		if e.inbox.flag.Load() {
			e.handleInbox()
			worked = true
		}
		if e.readyFlag.Load() {
			e.takeReady()
			worked = true
		}
		if e.mem.freed.Load() {
			e.retryMemory()
			worked = true
		}
		next, more := e.pumpAll()
		e.flushAcks()
		if err := e.flush(); err != nil && !e.stopping.Load() {
			if errors.Is(err, ErrLinkClosed) {
				e.err = fmt.Errorf("afxdp: send on %v: %w", e.link.LocalAddr(), err)
				break
			}
			// The datagrams are lost; the protocol sends them again.
			e.ctr.sendErrors.Add(1)
		}
		if worked || more {
			idleAt = time.Time{}
			continue
		}
		if idleAt.IsZero() {
			idleAt = e.now
		}
		if e.opts.Busy && !e.poll.backOff(e.now, idleAt) {
			runtime.Gosched() // as above: goroutines woken by other means
			continue
		}
		if (e.opts.Spin > 0 && e.now.Sub(idleAt) < e.opts.Spin) || e.now.Before(e.streamUntil) {
			// Let the goroutines this loop woke (a Receive loop, a
			// caller) run on this P while spinning.
			runtime.Gosched()
			continue
		}
		if err := e.park(next); err != nil && !e.stopping.Load() {
			e.err = fmt.Errorf("afxdp: wait on %v: %w", e.link.LocalAddr(), err)
			break
		}
	}
	e.shutdown()
}

// park sleeps in the link's Wait until the next timer (a delayed
// acknowledgement is one), and at most an RTO: packets a sender transmitted
// while the reactor was parked started retransmission timers it does not
// know about. The loop lock is released meanwhile, so senders that find
// the reactor sleeping transmit themselves (see enqueue).
func (e *Endpoint) park(next time.Time) error {
	wait := e.opts.RTO
	if !next.IsZero() {
		wait = min(max(next.Sub(e.now), 0), wait)
	}
	e.sleeping.Store(true)
	var err error
	if !e.readyFlag.Load() && !e.stopping.Load() {
		e.loop.Unlock()
		err = e.link.Wait(wait)
		e.loop.Lock()
	}
	e.sleeping.Store(false)
	return err
}

// queue hands the packet written in the link's TxBuffer to the link.
func (e *Endpoint) queue(n int, to netip.AddrPort) {
	e.link.Queue(n, to)
	e.unflushed++
}

// flush transmits what the loop queued.
func (e *Endpoint) flush() error {
	if e.unflushed > 0 {
		e.ctr.sent.Add(uint64(e.unflushed))
		e.ctr.batches.Add(1)
		e.unflushed = 0
	}
	return e.link.Flush()
}

// shutdown ends every session, telling peers, and refuses further work.
func (e *Endpoint) shutdown() {
	e.stopping.Store(true)
	defer e.poll.release()
	err := e.err
	if err == nil {
		err = ErrClosed
	}
	for len(e.list) > 0 {
		s := e.list[len(e.list)-1]
		s.control(TypeClose)
		e.endSession(s, err)
	}
	for _, ho := range e.halfList {
		if !ho.gone {
			e.closeHalf(ho)
		}
	}
	e.halfList = nil
	if e.group == nil {
		discardAccepts(e.accepts) // a Group does it once all its endpoints stopped
	}
	e.flush()
	// Sessions queued after the last takeReady (a Dial racing Close).
	e.mu.Lock()
	pending := e.ready
	e.ready = nil
	e.mu.Unlock()
	for _, s := range pending {
		s.end(err)
	}
}

func (e *Endpoint) takeReady() {
	e.mu.Lock()
	q := e.ready
	e.ready = e.readyNext[:0]
	e.readyFlag.Store(false)
	e.mu.Unlock()
	for i, s := range q {
		q[i] = nil
		if s.ended {
			continue
		}
		if !s.registered {
			e.register(s)
			if e.group != nil {
				e.group.claim(s.key, e)
			}
		}
		closing := s.take()
		if r := s.conn.receiver(); r != nil && !e.opts.BlockingReceiver {
			s.conn.drainBacklog(r) // frames that arrived before Receive
		}
		if err := s.reopen(); err != nil {
			s.control(TypeReset)
			e.endSession(s, err)
			continue
		}
		if closing {
			// Twice, since a lost CLOSE leaves the peer waiting for its
			// dead-peer timeout.
			s.control(TypeClose)
			s.control(TypeClose)
			e.endSession(s, fmt.Errorf("afxdp: session %#x with %v: %w", s.key.id, s.key.peer, ErrClosed))
		}
	}
	e.readyNext = q[:0]
}

// pumpAll runs every session's timers and transmits what their windows
// allow. It returns the earliest timer and whether a session had more to
// send than its budget.
func (e *Endpoint) pumpAll() (next time.Time, more bool) {
	next = e.halfTimers()
	for i := 0; i < len(e.list); i++ {
		s := e.list[i]
		t, err := s.timers()
		if err != nil {
			e.endSession(s, err)
			i--
			continue
		}
		if s.pump(pumpBudget) == pumpBudget {
			more = true
		}
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next, more
}

// flushAcks sends an ACK for every session that received data this loop
// and had no data of its own to carry the acknowledgement.
func (e *Endpoint) flushAcks() {
	for i, s := range e.acks {
		e.acks[i] = nil
		s.inAcks = false
		if !s.ended && (s.ackOwed || s.sackOwed || s.dsackOwed) {
			s.control(TypeAck)
		}
	}
	e.acks = e.acks[:0]
}

func (e *Endpoint) handle(d *Datagram) {
	h, data, err := DecodeHeader(d.Data)
	if err != nil {
		e.ctr.malformed.Add(1)
		return
	}
	key := sessionKey{peer: d.From, id: h.Session}
	s := e.sessions[key]
	if s == nil && e.group != nil {
		if o := e.group.ownerOf(key); o != nil && o != e {
			o.forward(d.Data, d.From)
			return
		}
	}
	if s == nil {
		if ho := e.half[key]; ho != nil {
			switch h.Type {
			case TypeOpen:
				e.answerOpen(ho) // the answer was lost
				return
			case TypeClose, TypeReset:
				e.closeHalf(ho)
				return
			}
			// The dialer's first packet after the answer: the
			// handshake is complete.
			if s = e.promote(ho); s == nil {
				return
			}
		}
	}
	switch h.Type {
	case TypeOpen:
		if s == nil && e.group != nil {
			if o, mine := e.group.claim(key, e); !mine && o != e {
				o.forward(d.Data, d.From) // another reactor took it a moment ago
				return
			}
		}
		if s == nil {
			e.openHalf(key, h.Offset)
			return
		}
		s.heardAt = e.now
		s.agree(h.Offset)
		s.onAck(&h)
		s.openAck()
		return
	case TypeReset:
		if s != nil {
			e.endSession(s, fmt.Errorf("afxdp: session %#x with %v: %w", h.Session, d.From, ErrReset))
		}
		return
	}
	if s == nil {
		if h.Type != TypeClose {
			e.reset(key)
		}
		return
	}
	s.heardAt = e.now
	if h.Flags&FlagSize != 0 {
		// The answer to this end's OPEN, or a repeat of it: acknowledge
		// it, which completes the peer's handshake.
		s.agree(h.Offset)
		s.ackNow()
	}
	if h.Flags&FlagProbe != 0 {
		s.ackNow()
	}
	if s.opening { // any answer opens the session
		s.opening = false
		s.openDone <- nil
	}
	switch h.Type {
	case TypeData:
		e.handleData(s, &h, data)
	case TypeAck:
		s.onAck(&h)
		if h.Flags&FlagSack != 0 {
			s.onSack(h.Ack, data)
		}
		if h.Flags&FlagDsack != 0 {
			s.onDsack(h.Msg)
		}
	case TypeClose:
		e.endSession(s, fmt.Errorf("afxdp: session %#x with %v: %w", h.Session, d.From, ErrPeerClosed))
	}
}

// handleData takes a DATA packet for s and schedules its acknowledgement.
// Packets of a frame still arriving in order are acknowledged every
// Options.AckEvery packets, or AckEvery packet times after the first one
// unacknowledged: an ACK costs the receiver a transmit kick and the sender
// a wake-up, and one per received batch (a few packets) halved the rate
// of a large tensor. A completed frame's acknowledgement waits up to
// Options.AckDelay for an answer or the next request to carry it. A gap
// is reported at the end of this loop.
func (e *Endpoint) handleData(s *session, h *PacketHeader, data []byte) {
	s.dataAt = e.now
	s.onAck(h)
	urgent, err := s.onData(h, data)
	if err != nil {
		s.control(TypeReset)
		e.endSession(s, err)
		return
	}
	if s.rx.active && e.opts.FrameSpin > 0 {
		e.streamUntil = e.now.Add(e.opts.FrameSpin)
	}
	inOrder := !urgent && (s.ooo == nil || s.ooo.held == 0)
	switch {
	case s.inAcks:
	case !s.ackOwed && !urgent:
	case s.framed && inOrder && e.opts.AckDelay > 0:
		if s.ackAt.IsZero() {
			s.ackAt = e.now.Add(e.opts.AckDelay)
		}
	case !s.framed && inOrder && s.unacked < e.opts.AckEvery:
		if s.ackAt.IsZero() {
			s.ackAt = e.now.Add(time.Duration(e.opts.AckEvery) * ackPacketTime)
		}
	default:
		s.inAcks = true
		e.acks = append(e.acks, s)
	}
}

// reset tells a peer that this endpoint has no session key.
func (e *Endpoint) reset(key sessionKey) {
	buf := e.link.TxBuffer()
	if buf == nil {
		return
	}
	PutHeader(buf, &PacketHeader{Type: TypeReset, Session: key.id})
	e.queue(HeaderLen, key.peer)
	e.ctr.resets.Add(1)
}

func (e *Endpoint) endSession(s *session, err error) {
	s.end(err)
	if e.sessions[s.key] == s {
		delete(e.sessions, s.key)
		e.forgetOwner(s.key)
	}
	if s.accepted {
		s.accepted = false
		e.caps.release(s.key.peer.Addr())
	}
	for i, x := range e.list {
		if x == s {
			last := len(e.list) - 1
			e.list[i] = e.list[last]
			e.list[last] = nil
			e.list = e.list[:last]
			break
		}
	}
	e.ctr.sessions.Store(uint64(len(e.list)))
}
