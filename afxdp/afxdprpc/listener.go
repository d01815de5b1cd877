package afxdprpc

import (
	"net"
	"sync"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// dualListener accepts TCP connections, which answer hellos, and the packet
// endpoint's sessions, so that one server serves both paths.
type dualListener struct {
	d     *dual
	tcp   rpc.Listener
	pkt   rpc.Listener
	conns chan rpc.Conn
	errs  chan error
	quit  chan struct{}
	once  sync.Once
}

func (l *dualListener) acceptLoop(src rpc.Listener, answerHellos bool) {
	for {
		c, err := src.Accept()
		if err != nil {
			if !answerHellos {
				// The packet path is an optimisation: without it the
				// server keeps serving on TCP.
				select {
				case <-l.quit:
				default:
					l.d.opts.Logger.Warn("starwire: packet listener stopped, serving tcp only", "err", err)
				}
				return
			}
			select {
			case l.errs <- err:
			case <-l.quit:
			}
			return
		}
		if answerHellos {
			c = &helloAnswerer{Conn: c, d: l.d}
		}
		select {
		case l.conns <- c:
		case <-l.quit:
			c.Close()
			return
		}
	}
}

func (l *dualListener) Accept() (rpc.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case err := <-l.errs:
		l.Close()
		return nil, err
	case <-l.quit:
		return nil, net.ErrClosed
	}
}

func (l *dualListener) Close() error {
	l.once.Do(func() {
		close(l.quit)
		l.tcp.Close()
		if l.pkt != nil {
			l.pkt.Close()
		}
	})
	return nil
}

func (l *dualListener) Addr() net.Addr { return l.tcp.Addr() }

// helloAnswerer is a server-side TCP connection that answers a client's
// hello with this end's capabilities and a ticket to open a packet session
// with, which it revokes when the connection ends; everything else reaches
// the server. It forwards rpc.ProgressConn and names its path
// (rpc.PathConn); it offers no readside.Reader or rpc.Withdrawer, which the
// core asks of client connections only, and no rpc.DeliveryClock, which a
// TCP connection does not have.
type helloAnswerer struct {
	rpc.Conn
	d *dual

	mu     sync.Mutex
	ticket uint64 // the ticket issued to the peer, 0 before its hello
	issued string // its String form
	ended  bool
}

func (c *helloAnswerer) Receive(r wire.Receiver) error {
	err := c.Conn.Receive(newAnswerReader(c, r))
	c.mu.Lock()
	c.ended = true
	if c.ticket != 0 {
		c.d.ep.Revoke(c.ticket)
	}
	c.mu.Unlock()
	return err
}

// answer returns the hello that answers the peer's, issuing its ticket
// the first time; the same ticket is handed again if the peer asks twice.
func (c *helloAnswerer) answer() []byte {
	h := c.d.local()
	if c.d.ep == nil {
		return h.encode()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return h.encode()
	}
	if c.ticket == 0 {
		t := c.d.ep.Issue()
		c.ticket, c.issued = t.ID, t.String()
	}
	h.Ticket = c.issued
	return h.encode()
}

// Progress implements rpc.ProgressConn.
func (c *helloAnswerer) Progress() (in, out uint64) { return progress(c.Conn) }

// Path implements rpc.PathConn: the server's calls on it came over TCP.
func (c *helloAnswerer) Path() netpath.Path { return netpath.TCP }

// answerReader passes a server's TCP frames through to its receiver,
// except the hello, which it answers. It forwards the receiver's
// rpc.Throttle (read-side flow control), readside.Waker and
// rpc.PlaintextWatcher, so that the TCP reader treats the server as it
// does on a plain connection; not readside.Lender, which a server's receiver
// does not offer.
type answerReader struct {
	c  *helloAnswerer
	r  wire.Receiver
	t  rpc.Throttle
	wk readside.Waker
	pw rpc.PlaintextWatcher
}

func newAnswerReader(c *helloAnswerer, r wire.Receiver) *answerReader {
	a := &answerReader{c: c, r: r}
	a.t, _ = r.(rpc.Throttle)
	a.wk, _ = r.(readside.Waker)
	a.pw, _ = r.(rpc.PlaintextWatcher)
	return a
}

// What the server's TCP half forwards of rpc's capabilities.
var (
	_ rpc.ProgressConn = (*helloAnswerer)(nil)
	_ rpc.PathConn     = (*helloAnswerer)(nil)

	_ rpc.Throttle         = (*answerReader)(nil)
	_ readside.Waker       = (*answerReader)(nil)
	_ rpc.PlaintextWatcher = (*answerReader)(nil)
)

func (a *answerReader) Alloc(in *wire.Inbound) error { return a.r.Alloc(in) }

// Room implements rpc.Throttle for a server that throttles.
func (a *answerReader) Room(payload uint64) bool { return a.t == nil || a.t.Room(payload) }

// WaitRoom implements rpc.Throttle.
func (a *answerReader) WaitRoom(payload uint64, closed <-chan struct{}) error {
	if a.t != nil {
		return a.t.WaitRoom(payload, closed)
	}
	return nil
}

// Woke implements readside.Waker; without the receiver's word, the reader
// yields as it would to a receiver that is no Waker.
func (a *answerReader) Woke() bool { return a.wk == nil || a.wk.Woke() }

// Unrun implements readside.Waker.
func (a *answerReader) Unrun() bool { return a.wk != nil && a.wk.Unrun() }

// PlaintextRefused implements rpc.PlaintextWatcher.
func (a *answerReader) PlaintextRefused() {
	if a.pw != nil {
		a.pw.PlaintextRefused()
	}
}

func (a *answerReader) Deliver(in *wire.Inbound) {
	if in.Header.Kind != wire.KindHello {
		a.r.Deliver(in)
		return
	}
	in.Release()
	a.c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindHello}, Meta: a.c.answer()})
}
