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

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/monoclock"
	"github.com/starwire/starwire/wire"

	"github.com/starwire/starwire/afxdp/link"
)

// An Endpoint runs the reliable packet protocol (package protocol) over one
// link.Link: it dials and accepts sessions, and each session is a Conn.
//
// Ownership: the link's receive side, the session table and every
// session's protocol state belong to whoever holds the loop lock. The
// reactor goroutine holds it except while parked in the link's Wait; a
// goroutine that queues work (Send, Close, Withdraw, Dial, a Receive
// asking for a reopen) while the reactor is parked may take it and run one
// step of the reactor's work itself (enqueue), which saves a hand-off on
// the latency path. Other goroutines touch only what the session's mutex
// guards (its queue of work) and atomics.
//
// The reactor receives a batch, lands in-order data in its frames'
// destinations, takes queued messages, transmits what the windows allow,
// acknowledges, and flushes the link in one batch. When a loop finds no
// work it keeps polling for Options.Spin and then sleeps in the link's Wait
// until a packet, a wake-up or the next timer. Most idle polls only look
// at the link and the flags other goroutines raise (turn.go).
//
// The receiver's Alloc runs under the loop lock, so that tensor bytes land
// in place as packets arrive, and so, by default, does Deliver: a quick
// handler answers within the same step, its answer carrying the
// acknowledgement. Either may thus run on the reactor or on a sender's
// goroutine, never two at once. Frames that arrive before Receive are held
// and delivered under the loop lock once it is called, or, when the
// session has ended meanwhile, by Receive itself after Done. Receivers
// that may block set Options.BlockingReceiver, and their frames are
// delivered from the Conn's Receive goroutine.
type Endpoint struct {
	link  link.Link
	opts  Options
	group *Group // nil unless one of a Group's endpoints
	inbox inbox  // packets forwarded by the group's other reactors

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

	// Owned by the loop lock's holder.
	env      *protocol.Env // the sessions' shared state, env.Now the loop's clock
	sessions map[protocol.Key]*session
	last     *session // the session lookup found last, while in sessions
	list     []*session
	rx       []link.Datagram

	// The session bounds, shared by a Group's endpoints, and the
	// half-open sessions (sessions.go).
	caps     *sessionCaps
	keys     *keys // the tickets OPENs are taken under (auth.go)
	half     map[protocol.Key]*halfOpen
	halfList []*halfOpen // the same, in the order they came
	halfNext int64       // when halfTimers next has work (0: never)

	// streamUntil is when the reactor may sleep again after a packet
	// that left a frame partly received (Options.FrameSpin).
	streamUntil int64
	err         error // why the reactor stopped; the reactor's
	// why is err for other goroutines, set before stopping: a Dial
	// refused while the sessions end says why too.
	why atomic.Pointer[error]

	ctr     counters
	poll    *pollClaim // what busy polling was granted (polling.go)
	parking parking    // the park bound (parking.go); the loop lock's holder's

	// Helping (help.go): the link as a pender, nil when it is not one;
	// when the parked reactor wakes on its own; the earliest timer a step
	// another reactor ran for it left (0: none); whether a helper woke it
	// since it parked. The times are readings of monoclock.Nanos, as
	// every reactor's clock is, so they compare across endpoints.
	pend      pender
	parkUntil atomic.Int64
	helpDue   atomic.Int64
	helpWoke  atomic.Bool
}

const (
	rxBatch     = 64
	pumpBudget  = 64 // packets a session transmits per reactor loop
	dialTimeout = 3 * time.Second
)

// NewEndpoint starts a reactor on link. The Endpoint owns the link from now
// on and closes it in Close.
func NewEndpoint(l link.Link, opts Options) *Endpoint {
	return newEndpoint(l, opts.withDefaults(), nil)
}

func newEndpoint(l link.Link, opts Options, g *Group) *Endpoint {
	e := &Endpoint{
		link: l, opts: opts, group: g,
		env:      protocol.NewEnv(opts.protocol(), l, l.MaxPayload(), monoclock.Nanos()),
		done:     make(chan struct{}),
		sessions: make(map[protocol.Key]*session),
		half:     make(map[protocol.Key]*halfOpen),
		rx:       make([]link.Datagram, rxBatch),
	}
	e.opts, e.poll = claimPolling(opts)
	e.env.Mem.OnFreed = func() {
		if e.sleeping.Load() {
			e.link.Wake()
		}
	}
	if g != nil {
		e.accepts, e.caps, e.keys = g.accepts, g.caps, g.keys
	} else {
		e.accepts, e.caps, e.keys = make(chan *Conn, max(opts.Backlog, 0)), newSessionCaps(&opts), newKeys(&opts)
	}
	if p, ok := l.(pender); ok {
		e.pend = p
		addReactor(e)
	}
	ready := make(chan struct{})
	go e.run(ready)
	<-ready
	return e
}

// Addr is the address peers dial to reach this endpoint.
func (e *Endpoint) Addr() netip.AddrPort { return e.link.LocalAddr() }

// Link returns the endpoint's link.
func (e *Endpoint) Link() link.Link { return e.link }

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	st := e.ctr.stats(&e.env.Ctr)
	st.Buffered = uint64(e.env.Mem.Buffered())
	return st
}

// resolver is implemented by links that must learn something about a peer
// (its MAC address) before sending to it, which may block.
type resolver interface {
	Resolve(ctx context.Context, peer netip.AddrPort) error
}

// Dial opens a session with the endpoint at addr ("ip:port") under
// Options.Ticket. Without a deadline in ctx it gives up after 3s.
func (e *Endpoint) Dial(ctx context.Context, addr string) (*Conn, error) {
	return e.DialTicket(ctx, addr, nil)
}

// DialTicket is Dial under ticket t, which the peer issued; nil means
// Options.Ticket.
func (e *Endpoint) DialTicket(ctx context.Context, addr string, t *Ticket) (*Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		ua, rerr := net.ResolveUDPAddr("udp4", addr)
		if rerr != nil {
			return nil, fmt.Errorf("afxdp: dial %s: %w", addr, rerr)
		}
		ap = ua.AddrPort()
	}
	return e.dial(ctx, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), t)
}

// DialAddr is Dial with a parsed address.
func (e *Endpoint) DialAddr(ctx context.Context, peer netip.AddrPort) (*Conn, error) {
	return e.dial(ctx, peer, nil)
}

func (e *Endpoint) dial(ctx context.Context, peer netip.AddrPort, t *Ticket) (*Conn, error) {
	if e.stopping.Load() {
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, e.stoppedErr())
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
	s := e.newSession(protocol.Key{Peer: peer, ID: rand.Uint64()})
	if err := e.dialAuth(s, t); err != nil {
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, err)
	}
	s.openDone = make(chan error, 1)
	s.p.Dial()
	e.enqueue(s)
	select {
	case err := <-s.openDone:
		if err != nil {
			return nil, fmt.Errorf("afxdp: dial %v: %w", peer, err)
		}
		return s.conn, nil
	case <-ctx.Done():
		s.conn.Close()
		if t == nil && e.opts.Ticket != nil {
			// An endpoint drops an OPEN under a ticket it does not hold
			// without a word (an answer would help whoever guesses), so
			// only the dialer can point at the likely cause.
			return nil, fmt.Errorf("afxdp: dial %v: %w: %s", peer, ctx.Err(), noAnswerUnderTicket)
		}
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, ctx.Err())
	case <-e.done:
		return nil, fmt.Errorf("afxdp: dial %v: %w", peer, e.stoppedErr())
	}
}

// noAnswerUnderTicket ends the error of a dial under Options.Ticket that
// got no answer.
const noAnswerUnderTicket = "no answer to the session's OPEN: a likely cause is a packet ticket the peer does not hold " +
	"(every task needs the same --packet_ticket_file or $STARWIRE_PACKET_TICKET_FILE); else the peer is down or unreachable"

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
// error when one stopped it. The reason is known as soon as stopping is
// set, before the sessions end.
func (e *Endpoint) stoppedErr() error {
	if why := e.why.Load(); why != nil {
		return fmt.Errorf("%w: %w", ErrClosed, *why)
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

// newSession makes a session named key; any goroutine may, as it touches
// nothing shared until the reactor registers it.
func (e *Endpoint) newSession(key protocol.Key) *session {
	s := &session{ep: e, key: key}
	s.conn = &Conn{s: s, onReactor: !e.opts.BlockingReceiver, deliveries: make(chan *wire.Inbound, e.deliveries()), done: make(chan struct{})}
	s.p = protocol.NewSession(e.env, key, (*upper)(s.conn))
	return s
}

// preReceive bounds the frames a session the reactor delivers holds
// until its Conn's Receive is called: it needs no more, its window
// shutting until then, and each of a thousand sessions would otherwise
// keep a queue of Options.Deliveries for those few moments.
const preReceive = 32

// deliveries is the room of a Conn's delivery queue: never less than one
// packet's frames, as they are taken together.
func (e *Endpoint) deliveries() int {
	n := e.opts.Deliveries
	if !e.opts.BlockingReceiver {
		n = min(n, preReceive)
	}
	return max(n, protocol.MaxPacked(e.env.DataLen()))
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
			e.env.Now = monoclock.Nanos()
			e.takeReady()
			var next int64
			next, more = e.transmit()
			// A reactor parked longer than an RTO, the endpoint idle
			// before this send, would run the timers it started late:
			// woken, it parks again with the bound of a busy endpoint.
			if e.parking.bound > e.opts.RTO {
				more = more || late(e.armed(next), e.parkUntil.Load(), e.opts.RTO)
			}
			e.parking.active = true
		}
		e.loop.Unlock()
		if !more {
			return
		}
	}
	e.link.Wake()
}

// transmit sends what the sessions have to send and the acknowledgements
// owed, for a step run outside the reactor's own loop (a sender's, a
// helper's). It returns the earliest timer and whether a session had more
// than its budget. A failed flush is counted: the datagrams are resent,
// and a closed link stops the reactor when it next flushes.
func (e *Endpoint) transmit() (next int64, more bool) {
	next, more = e.pumpAll()
	e.env.FlushAcks()
	if e.flush() != nil {
		e.ctr.sendErrors.Add(1)
	}
	return next, more
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
	var (
		idleAt int64 // when the idle spell began (0: working)
		t      turn
	)
	for !e.stopping.Load() {
		t.start(e.env)
		if e.opts.Busy {
			// A spinning reactor's back-off judges every poll's gap.
			t.clock(e.env)
		}
		n, err := e.link.Receive(e.rx)
		if err != nil {
			e.err = fmt.Errorf("afxdp: receive on %v: %w", e.link.LocalAddr(), err)
			break
		}
		if n > 0 {
			t.received(e.env)
		}
		for i := range n {
			e.handle(&e.rx[i])
		}
		if n > 0 {
			e.ctr.received.Add(uint64(n))
			// Callers woken by what this batch delivered wait in this
			// thread's run queue: yielding runs them here now instead of
			// waking another thread for them, which costs more than the
			// call itself on a VM. Yielding before transmitting lets
			// their next requests carry the acknowledgements this batch
			// owes, which then need no packet (and no kick) of their own.
			// A busy reactor yields too: never yielding, it left them
			// waiting for the scheduler's 10ms preemption whenever every
			// P ran a reactor. It yields even when the batch's handlers
			// answered inline (on this loop): sending those answers
			// before yielding made sequential calls slower whenever
			// other processes loaded the host.
			runtime.Gosched()
		}
		worked := n > 0
		if e.inbox.flag.Load() {
			t.clock(e.env)
			e.handleInbox()
			worked = true
		}
		if e.readyFlag.Load() {
			t.clock(e.env)
			e.takeReady()
			worked = true
		}
		if e.env.Mem.Freed() {
			t.clock(e.env)
			e.env.RetryMemory(e.endProtocolSession)
			worked = true
		}
		if worked || t.pumps() {
			var more bool
			t.next, more = e.pumpAll()
			e.env.FlushAcks()
			if err := e.flush(); err != nil && !e.stopping.Load() {
				if errors.Is(err, link.ErrLinkClosed) {
					e.err = fmt.Errorf("afxdp: send on %v: %w", e.link.LocalAddr(), err)
					break
				}
				// The datagrams are lost; the protocol sends them again.
				e.ctr.sendErrors.Add(1)
			}
			if worked || more {
				idleAt = 0
				t.worked()
				e.parking.active = true
				continue
			}
		}
		now := e.env.Now
		if idleAt == 0 {
			idleAt = now
		}
		t.idle()
		if t.pumps() && e.helpParked(now) {
			// Another reactor's packets went out: answers may come, and
			// are taken at once if they did; otherwise yield, as a poll
			// does.
			idleAt = 0
			if e.pend == nil || !e.pend.Pending() {
				runtime.Gosched()
			}
			continue
		}
		if e.opts.Busy && !e.poll.backOff(monoclock.Time(now), monoclock.Time(idleAt)) {
			runtime.Gosched() // as above: goroutines woken by other means
			continue
		}
		if (e.opts.Spin > 0 && time.Duration(now-idleAt) < e.opts.Spin) || now < e.streamUntil {
			// Let the goroutines this loop woke (a Receive loop, a
			// caller) run on this P while spinning.
			runtime.Gosched()
			continue
		}
		e.wakeHelped()
		err = e.park(t.next)
		t.worked() // senders may have stepped the loop meanwhile
		if err != nil && !e.stopping.Load() {
			e.err = fmt.Errorf("afxdp: wait on %v: %w", e.link.LocalAddr(), err)
			break
		}
	}
	e.shutdown()
}

// park sleeps in the link's Wait until the next timer (a delayed
// acknowledgement is one), and at most the park bound (parking.go):
// packets a sender transmitted while the reactor was parked started
// retransmission timers it does not know about. The loop lock is released
// meanwhile, so senders that find the reactor sleeping transmit themselves
// (see enqueue).
func (e *Endpoint) park(next int64) error {
	wait := e.parking.wait(e.env.Now, next, e.opts.RTO)
	if wait > e.opts.RTO {
		// Sleeping longer than an RTO, the timers the last pump armed,
		// which next does not hold, count too.
		if n := e.armed(next); n != 0 {
			wait = min(wait, max(time.Duration(n-e.env.Now), 0))
		}
	}
	e.sleeping.Store(true)
	var err error
	if !e.readyFlag.Load() && !e.stopping.Load() {
		e.parkUntil.Store(e.env.Now + int64(wait))
		e.ctr.parks.Add(1)
		if e.pend != nil {
			reactors.sleeping.Add(1)
		}
		e.loop.Unlock()
		err = e.link.Wait(wait)
		e.loop.Lock()
		if e.pend != nil {
			reactors.sleeping.Add(-1)
		}
		e.helpDue.Store(0) // this loop runs the timers from now on
		e.helpWoke.Store(false)
	}
	e.sleeping.Store(false)
	return err
}

// queue hands the packet written in the link's TxBuffer to the link.
func (e *Endpoint) queue(n int, to netip.AddrPort) {
	e.link.Queue(n, to)
	e.env.Queued++
}

// flush transmits what the loop queued.
func (e *Endpoint) flush() error {
	if n := e.env.Queued; n > 0 {
		e.ctr.sent.Add(uint64(n))
		e.ctr.batches.Add(1)
		e.env.Queued = 0
	}
	return e.link.Flush()
}

// shutdown ends every session, telling peers, and refuses further work.
func (e *Endpoint) shutdown() {
	if e.err != nil {
		why := e.err
		e.why.Store(&why)
	}
	e.stopping.Store(true)
	if e.pend != nil {
		removeReactor(e)
	}
	defer e.poll.release()
	err := e.err
	if err == nil {
		err = ErrClosed
	}
	for len(e.list) > 0 {
		s := e.list[len(e.list)-1]
		s.p.Control(protocol.TypeClose)
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
			s.conn.drainBacklog(r, e.env.Now) // frames that arrived before Receive
		}
		if err := s.p.Reopen(); err != nil {
			s.p.Control(protocol.TypeReset)
			e.endSession(s, err)
			continue
		}
		if closing {
			// Twice, since a lost CLOSE leaves the peer waiting for its
			// dead-peer timeout.
			s.p.Control(protocol.TypeClose)
			s.p.Control(protocol.TypeClose)
			e.endSession(s, s.closed())
		}
	}
	e.readyNext = q[:0]
}

// pumpAll runs every session's timers and transmits what their windows
// allow. It returns the earliest timer and whether a session had more to
// send than its budget.
func (e *Endpoint) pumpAll() (next int64, more bool) {
	next = e.halfTimers()
	for i := 0; i < len(e.list); i++ {
		s := e.list[i]
		t, err := s.p.Timers()
		if err != nil {
			e.endSession(s, err)
			i--
			continue
		}
		if s.p.Pump(pumpBudget) == pumpBudget {
			more = true
		}
		next = earliest(next, t)
	}
	return next, more
}

func (e *Endpoint) handle(d *link.Datagram) {
	h, data, err := protocol.DecodeHeader(d.Data)
	if err != nil {
		e.ctr.malformed.Add(1)
		return
	}
	key := protocol.Key{Peer: d.From, ID: h.Session}
	s := e.lookup(key)
	if s == nil && e.group != nil {
		if o := e.group.ownerOf(key); o != nil && o != e {
			o.forward(d.Data, d.From)
			return
		}
	}
	if s == nil {
		if ho := e.half[key]; ho != nil {
			if !ho.authentic(&h) {
				e.ctr.badTokens.Add(1)
				return
			}
			switch h.Type {
			case protocol.TypeOpen:
				e.answerOpen(ho) // the answer was lost
				return
			case protocol.TypeClose, protocol.TypeReset:
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
	if s == nil {
		switch h.Type {
		case protocol.TypeOpen:
			e.open(key, &h, data, d)
		case protocol.TypeReset, protocol.TypeClose:
		default:
			e.reset(key, h.Token)
		}
		return
	}
	if !s.p.Authentic(&h) {
		e.ctr.badTokens.Add(1)
		return
	}
	opening := s.p.Opening()
	err = s.p.Handle(&h, data)
	if opening && !s.p.Opening() {
		s.openDone <- nil
	}
	if err != nil {
		e.endSession(s, err)
		return
	}
	if h.Type == protocol.TypeData && e.opts.FrameSpin > 0 && s.p.Receiving() {
		e.streamUntil = e.env.Now + int64(e.opts.FrameSpin)
	}
}

// reset tells a peer that this endpoint has no session key, echoing the
// token of the packet it answers, which proves it saw that packet.
func (e *Endpoint) reset(key protocol.Key, echo uint64) {
	buf := e.link.TxBuffer()
	if buf == nil {
		return
	}
	protocol.PutHeader(buf, &protocol.PacketHeader{Type: protocol.TypeReset, Session: key.ID, Token: echo})
	e.queue(protocol.HeaderLen, key.Peer)
	e.ctr.resets.Add(1)
}

// lookup returns the session of key, or nil. It keeps the one it found
// last: a batch's packets mostly come from one session, and comparing a
// key costs less than hashing it.
func (e *Endpoint) lookup(key protocol.Key) *session {
	if s := e.last; s != nil && s.key == key {
		return s
	}
	s := e.sessions[key]
	if s != nil {
		e.last = s
	}
	return s
}

// endSession ends s and drops it from the tables, which are up to date,
// and counted in Stats, before its Conn's Done is closed.
func (e *Endpoint) endSession(s *session, err error) {
	if e.sessions[s.key] == s {
		delete(e.sessions, s.key)
		e.forgetOwner(s.key)
	}
	if e.last == s {
		e.last = nil
	}
	if s.accepted {
		s.accepted = false
		e.caps.release(s.key.Peer.Addr())
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
	s.end(err)
}

// endProtocolSession ends the session p belongs to with err.
func (e *Endpoint) endProtocolSession(p *protocol.Session, err error) {
	if s := e.sessions[p.Key()]; s != nil && s.p == p {
		e.endSession(s, err)
	}
}

// earliest is the earlier of two times, 0 (none) counting as later than
// any.
func earliest(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}
