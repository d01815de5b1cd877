package afxdprpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// DualOptions configure Dual.
type DualOptions struct {
	// Path says what the packet network runs over: netpath.AFXDP or
	// netpath.UDP (as afxdp.Open reports it).
	Path netpath.Path
	// AllowUDP moves calls to a packet path over kernel UDP too. By default
	// only AF_XDP on both ends is worth leaving TCP for: the kernel's UDP
	// path is slower than its TCP.
	AllowUDP bool
	// OpenTimeout bounds opening the packet session after the hello; zero
	// means one second.
	OpenTimeout time.Duration
	// Logger receives the one line per peer that says which path it uses;
	// nil means slog.Default().
	Logger *slog.Logger
	// Policy chooses, per call, between the packet path and TCP once both
	// are open; the zero value measures them (PathAuto).
	Policy PathPolicy
	// Packet, when set, is the peer's packet endpoint ("ip:port"), known
	// without a hello because whoever built the network knows both ends
	// (a fabric of links between tasks): no hello is sent, the session
	// opens as the connection starts receiving, and the peer's stream
	// listener need not answer hellos. Path must then be the peer's too.
	Packet string
}

// Dual returns an rpc.Transport that chooses a path per peer. Every
// connection starts on stream (TCP) with a hello that advertises the packet
// endpoint ep; when both ends have one over AF_XDP and a session between
// them opens, calls move to the packet path. TCP stays open for control and
// takes the calls back if the packet path fails. A nil ep makes a transport
// that stays on TCP but still answers hellos.
//
// The listener accepts both paths, so one rpc.Server serves them all.
func Dual(stream rpc.Transport, ep Network, opts DualOptions) *DualTransport {
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &DualTransport{stream: stream, ep: ep, opts: opts, conns: make(map[*dualConn]struct{})}
}

// DualTransport is the rpc.Transport Dual returns.
type DualTransport struct {
	stream rpc.Transport
	ep     Network
	opts   DualOptions

	mu    sync.Mutex
	conns map[*dualConn]struct{} // the open client connections
	ended PathStats              // what the closed ones carried (Totals)
}

// dual is the transport's name inside the package.
type dual = DualTransport

// Name implements rpc.Transport.
func (d *dual) Name() string { return "dual" }

// Stats returns the path statistics of each open client connection.
func (d *dual) Stats() []PathStats {
	d.mu.Lock()
	conns := make([]*dualConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	out := make([]PathStats, 0, len(conns))
	for _, c := range conns {
		out = append(out, c.Stats())
	}
	return out
}

// Totals returns what every client connection of the transport carried,
// the closed ones too, summed: calls and bytes per path, with the
// crossover and the sizes over the bypass of the connection seen last (an
// open one if there is one).
func (d *dual) Totals() PathStats {
	open := d.Stats()
	d.mu.Lock()
	t := d.ended
	d.mu.Unlock()
	for _, st := range open {
		t = addPathStats(t, st)
	}
	if t.Policy == "" {
		t.Policy = d.opts.Policy.String()
	}
	return t
}

// addPathStats adds b's counts to a's and takes the rest from b.
func addPathStats(a, b PathStats) PathStats {
	b.TCPCalls += a.TCPCalls
	b.AFXDPCalls += a.AFXDPCalls
	b.TCPBytes += a.TCPBytes
	b.AFXDPBytes += a.AFXDPBytes
	return b
}

func (d *dual) local() hello {
	h := hello{Version: helloVersion}
	if d.ep != nil {
		h.Packet, h.Path = d.ep.Addr().String(), d.opts.Path
	}
	return h
}

// bypassPath names the packet path in per-call reports: DualOptions.Path,
// or netpath.AFXDP (the packet protocol) when that is not set.
func (d *dual) bypassPath() netpath.Path {
	if d.opts.Path == "" {
		return netpath.AFXDP
	}
	return d.opts.Path
}

// usable reports whether calls to a peer advertising h may leave TCP.
func (d *dual) usable(h hello) bool {
	if d.ep == nil || h.Packet == "" {
		return false
	}
	if d.opts.AllowUDP {
		return true
	}
	return d.opts.Path == netpath.AFXDP && h.Path == netpath.AFXDP
}

func (d *dual) Dial(ctx context.Context, addr string) (rpc.Conn, error) {
	tc, err := d.stream.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	c := &dualConn{d: d, tcp: tc, peer: addr, ch: newChooser(d.opts.Policy)}
	c.sr, _ = tc.(readside.Reader)
	if d.opts.Packet == "" {
		if err := tc.Send(&wire.Message{Header: wire.Header{Kind: wire.KindHello}, Meta: d.local().encode()}); err != nil {
			tc.Close()
			return nil, fmt.Errorf("afxdprpc: hello to %s: %w", addr, err)
		}
	}
	d.mu.Lock()
	d.conns[c] = struct{}{}
	d.mu.Unlock()
	return c, nil
}

func (d *dual) Listen(addr string) (rpc.Listener, error) {
	tl, err := d.stream.Listen(addr)
	if err != nil {
		return nil, err
	}
	l := &dualListener{d: d, tcp: tl, conns: make(chan rpc.Conn), errs: make(chan error, 2), quit: make(chan struct{})}
	go l.acceptLoop(tl, true)
	if d.ep != nil {
		pl, err := (&transport{ep: d.ep, path: d.bypassPath()}).Listen("")
		if err != nil {
			tl.Close()
			return nil, err
		}
		l.pkt = pl
		go l.acceptLoop(pl, false)
	}
	return l, nil
}

// dualConn is a client connection that starts on TCP and may move its
// calls to a packet session.
//
// Its TCP half is the stream transport's connection as it is: the read
// side is lent to callers (readside.Reader) for the calls that go over TCP,
// and the receiver's Lender and Waker reach the TCP reader through
// helloReader, so a call that stays on TCP costs what it costs on a plain
// connection. It offers no rpc.DeliveryClock: the core reads that on
// server connections only, and the dual listener hands the server the
// packet sessions themselves.
type dualConn struct {
	d    *dual
	tcp  rpc.Conn
	sr   readside.Reader // tcp, when it lends its read side
	peer string
	r    wire.Receiver
	hr   *helloReader // what the TCP half delivers to
	pkt  atomic.Pointer[afxdp.Conn]
	ch   *chooser

	once   sync.Once // the hello is handled once
	closed atomic.Bool
	// opened is the packet session once there was one, kept after the
	// calls left it: Withdraw asks it for the messages it may still hold.
	opened atomic.Pointer[afxdp.Conn]
}

// Path reports the path calls take now; rpc.Client.Stats shows it.
func (c *dualConn) Path() netpath.Path {
	if c.pkt.Load() != nil {
		return c.d.opts.Path
	}
	return netpath.TCP
}

// Stats returns the connection's calls and bytes per path and its
// crossover.
func (c *dualConn) Stats() PathStats {
	st := c.ch.stats()
	st.Peer = c.peer
	if c.pkt.Load() != nil {
		st.Packet = c.d.opts.Path
	}
	return st
}

// Send implements rpc.Conn with SendPath.
func (c *dualConn) Send(m *wire.Message) error {
	_, err := c.SendPath(m)
	return err
}

// SendPath implements rpc.PathSender. It sends a request over the path
// the chooser picks for it, whole, and counts it there; a cancel follows
// its request's path, so that the peer that has the call hears of it;
// other frames take the packet path while it is open.
func (c *dualConn) SendPath(m *wire.Message) (path netpath.Path, err error) {
	p := c.pkt.Load()
	switch m.Header.Kind {
	case wire.KindRequest:
		if c.ch != nil && !c.ch.choose(m, p != nil) {
			return netpath.TCP, c.tcp.Send(m)
		}
	case wire.KindCancel:
		if c.ch == nil {
			break
		}
		if bypass, known := c.ch.pathOf(m.Header.CallID); known && !bypass {
			return netpath.TCP, c.tcp.Send(m)
		} else if !known && p != nil {
			// Its request's path is forgotten: tell both. A peer that
			// does not have the call ignores the cancel.
			both := *m
			both.Done = nil
			c.tcp.Send(&both)
		}
	}
	if p != nil {
		err := p.Send(m)
		if err == nil {
			return c.d.bypassPath(), nil
		}
		c.leavePacket(p, err)
	}
	return netpath.TCP, c.tcp.Send(m)
}

// Withdraw implements rpc.Withdrawer on whichever path holds m. Each path
// answers Completing for a message it does not hold, whether it finished it
// or never had it, and a message is sent on one path only (Send tries TCP
// only once the packet session refused it, before returning). So the
// packet session, if there ever was one, is asked first: Unsent or
// Withdrawn means it held m; otherwise TCP is asked, and its answer is
// final, Completing meaning neither holds m. Without a Withdrawer on TCP, m
// may be there, so it is Kept.
func (c *dualConn) Withdraw(m *wire.Message) rpc.Withdrawal {
	if p := c.opened.Load(); p != nil {
		if got := p.Withdraw(m); got != rpc.Completing {
			return got
		}
	}
	if w, ok := c.tcp.(rpc.Withdrawer); ok {
		return w.Withdraw(m)
	}
	return rpc.Kept
}

// Progress implements rpc.ProgressConn with the TCP path's bytes; the
// client counts the frames of both paths itself.
func (c *dualConn) Progress() (in, out uint64) { return progress(c.tcp) }

// SelfReading implements readside.Reader: the TCP half's read side is lent
// when the stream transport lends it.
func (c *dualConn) SelfReading() bool { return c.sr != nil && c.sr.SelfReading() }

// Answers implements readside.Reader: only the answers to requests sent
// over TCP arrive on the read side lent.
func (c *dualConn) Answers(path string) bool { return netpath.Path(path) == netpath.TCP }

// ReadTurn implements readside.Reader. The frame goes through helloReader,
// as the receiving goroutine's would, so the hello and the chooser's
// timing see it; r is the receiver Receive was given.
func (c *dualConn) ReadTurn(r wire.Receiver) error { return c.sr.ReadTurn(c.hr) }

// ReadTurnUntil implements readside.Reader as ReadTurn does.
func (c *dualConn) ReadTurnUntil(r wire.Receiver) (stopped bool, err error) {
	return c.sr.ReadTurnUntil(c.hr)
}

// Interrupt, ResumeReads, WholeLimit, Leave, Check and Fail implement
// readside.Reader with the TCP half's.
func (c *dualConn) Interrupt()           { c.sr.Interrupt() }
func (c *dualConn) ResumeReads()         { c.sr.ResumeReads() }
func (c *dualConn) WholeLimit() uint64   { return c.sr.WholeLimit() }
func (c *dualConn) Leave() bool          { return c.sr.Leave() }
func (c *dualConn) Check() error         { return c.sr.Check() }
func (c *dualConn) Fail(err error) error { return c.sr.Fail(err) }

// What the dual connection forwards of the core's capabilities (see the type's
// doc for what it does not).
var (
	_ rpc.PathSender   = (*dualConn)(nil)
	_ rpc.PathConn     = (*dualConn)(nil)
	_ readside.Reader  = (*dualConn)(nil)
	_ rpc.Withdrawer   = (*dualConn)(nil)
	_ rpc.ProgressConn = (*dualConn)(nil)

	_ readside.Lender = (*helloReader)(nil)
	_ readside.Waker  = (*helloReader)(nil)
)

func progress(c rpc.Conn) (in, out uint64) {
	if pc, ok := c.(rpc.ProgressConn); ok {
		return pc.Progress()
	}
	return 0, 0
}

// Receive runs the TCP receive loop, and the packet session's loop once it
// exists, both delivering to r. Alloc and Deliver of one frame come from
// one goroutine; frames of the two paths may be delivered concurrently.
func (c *dualConn) Receive(r wire.Receiver) error {
	c.r = r
	c.hr = newHelloReader(c, r)
	if c.d.opts.Packet != "" {
		go c.upgrade(hello{Version: helloVersion, Packet: c.d.opts.Packet, Path: c.d.opts.Path})
	}
	err := c.tcp.Receive(c.hr)
	c.closed.Store(true)
	if p := c.pkt.Swap(nil); p != nil {
		p.Close()
	}
	c.forget()
	return err
}

func (c *dualConn) Close() error {
	c.closed.Store(true)
	if p := c.pkt.Swap(nil); p != nil {
		p.Close()
	}
	c.forget()
	return c.tcp.Close()
}

// forget drops the connection from its transport's Stats, keeping what it
// carried for Totals; a connection is forgotten once (Receive's end and
// Close both call it).
func (c *dualConn) forget() {
	st := c.Stats()
	c.d.mu.Lock()
	if _, open := c.d.conns[c]; open {
		delete(c.d.conns, c)
		c.d.ended = addPathStats(c.d.ended, st)
	}
	c.d.mu.Unlock()
}

func (c *dualConn) LocalAddr() net.Addr  { return c.tcp.LocalAddr() }
func (c *dualConn) RemoteAddr() net.Addr { return c.tcp.RemoteAddr() }

// upgrade opens a packet session to the peer that advertised h and moves
// the calls to it, or says once why they stay on TCP.
func (c *dualConn) upgrade(h hello) {
	log := c.d.opts.Logger.With("peer", c.peer)
	if !c.d.usable(h) {
		log.Info("starwire: calls stay on tcp", "local", c.d.local().Path, "remote", h.Path)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.d.opts.OpenTimeout)
	defer cancel()
	var t *afxdp.Ticket // none: the network's own (DualOptions.Packet)
	if h.Ticket != "" {
		pt, err := afxdp.ParseTicket(h.Ticket)
		if err != nil {
			log.Warn("starwire: calls stay on tcp: bad ticket in hello", "err", err)
			return
		}
		t = &pt
	}
	p, err := c.d.ep.DialTicket(ctx, h.Packet, t)
	if err != nil {
		log.Warn("starwire: calls stay on tcp: packet path unusable", "packet", h.Packet, "err", err)
		return
	}
	// Publish, then look at closed: Close sets closed before it takes pkt,
	// so either Close finds p and closes it, or this sees closed.
	c.opened.Store(p)
	c.pkt.Store(p)
	if c.closed.Load() {
		if c.pkt.CompareAndSwap(p, nil) {
			p.Close()
		}
		return
	}
	log.Info("starwire: calls move to the packet path", "path", c.d.opts.Path, "packet", h.Packet)
	go func() {
		err := p.Receive(answerTimer{c: c, r: c.r})
		c.leavePacket(p, err)
	}()
}

// leavePacket hands the calls back to TCP after the packet path failed.
func (c *dualConn) leavePacket(p *afxdp.Conn, err error) {
	if c.pkt.CompareAndSwap(p, nil) {
		p.Close()
		switch {
		case c.closed.Load():
		case errors.Is(err, afxdp.ErrPeerClosed):
			// The peer is shutting down: nothing failed.
			c.d.opts.Logger.Info("starwire: packet session closed by the peer, calls back on tcp", "peer", c.peer)
		default:
			c.d.opts.Logger.Warn("starwire: packet path failed, calls back on tcp", "peer", c.peer, "err", err)
		}
	}
}

// helloReader passes the TCP half's frames through to the client's
// receiver, except the peer's hello, which starts the path choice; the
// chooser sees each answer first. It forwards the receiver's readside.Lender
// and readside.Waker, so that the TCP reader lends and yields as it does for a
// plain connection; not rpc.Throttle, which a client's receiver does not
// offer.
type helloReader struct {
	c  *dualConn
	r  wire.Receiver
	ld readside.Lender // r, when it lends the read side
	wk readside.Waker  // r, when it says whom it woke
}

func newHelloReader(c *dualConn, r wire.Receiver) *helloReader {
	h := &helloReader{c: c, r: r}
	h.ld, _ = r.(readside.Lender)
	h.wk, _ = r.(readside.Waker)
	return h
}

func (h *helloReader) Alloc(in *wire.Inbound) error { return h.r.Alloc(in) }

// MayLend implements readside.Lender; a receiver that does not lend never may.
func (h *helloReader) MayLend(in *wire.Inbound) bool {
	return h.ld != nil && in.Header.Kind != wire.KindHello && h.ld.MayLend(in)
}

// DeliverLending implements readside.Lender; MayLend said yes, so in is no
// hello.
func (h *helloReader) DeliverLending(in *wire.Inbound) bool {
	if h.c.ch != nil {
		h.c.ch.answered(&in.Header)
	}
	return h.ld.DeliverLending(in)
}

// WaitLent implements readside.Lender.
func (h *helloReader) WaitLent(closed <-chan struct{}) error { return h.ld.WaitLent(closed) }

// Woke implements readside.Waker; without the receiver's word, the reader
// yields as it would to a receiver that is no Waker.
func (h *helloReader) Woke() bool { return h.wk == nil || h.wk.Woke() }

// Unrun implements readside.Waker.
func (h *helloReader) Unrun() bool { return h.wk != nil && h.wk.Unrun() }

func (h *helloReader) Deliver(in *wire.Inbound) {
	if in.Header.Kind != wire.KindHello {
		if h.c.ch != nil {
			h.c.ch.answered(&in.Header)
		}
		h.r.Deliver(in)
		return
	}
	peer, err := decodeHello(in.Meta)
	in.Release()
	h.c.once.Do(func() {
		if err != nil {
			h.c.d.opts.Logger.Warn("starwire: calls stay on tcp: bad hello", "peer", h.c.peer, "err", err)
			return
		}
		go h.c.upgrade(peer)
	})
}

// answerTimer passes the packet path's frames through to the client's
// receiver, showing the chooser each answer first. It forwards none of
// rpc's receiver capabilities: a packet session asks for none.
type answerTimer struct {
	c *dualConn
	r wire.Receiver
}

func (a answerTimer) Alloc(in *wire.Inbound) error { return a.r.Alloc(in) }

func (a answerTimer) Deliver(in *wire.Inbound) {
	if a.c.ch != nil {
		a.c.ch.answered(&in.Header)
	}
	a.r.Deliver(in)
}
