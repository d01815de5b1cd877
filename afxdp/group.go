package afxdp

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/afxdp/protocol"

	"github.com/starwire/starwire/afxdp/link"
)

// A Group runs an Endpoint, and so a reactor, on each of several links that
// share one address: the per-queue links of link.OpenXSKLinks. A session belongs
// to the endpoint that dialed or accepted it; a packet that arrives on
// another endpoint's queue (the device hashed the flow elsewhere, or the
// generic XDP hook reports every packet on queue 0) is copied to the owner's
// inbox and handled by the owner's reactor, so the session state keeps a
// single owner. Dial spreads sessions over the endpoints in turn.
type Group struct {
	eps     []*Endpoint
	owner   sync.Map // protocol.Key → *Endpoint
	next    atomic.Uint32
	accepts chan *Conn
	caps    *sessionCaps // the session bounds, shared
	keys    *keys        // the tickets, shared
	done    chan struct{}
	once    sync.Once
}

// NewGroup starts an endpoint on each link. With opts.Pin, endpoint i is
// pinned to CPU opts.CPU+i. The Group owns the links.
func NewGroup(links []link.Link, opts Options) *Group {
	opts = opts.withDefaults()
	g := &Group{accepts: make(chan *Conn, max(opts.Backlog, 0)), caps: newSessionCaps(&opts), keys: newKeys(&opts), done: make(chan struct{})}
	for i, l := range links {
		o := opts
		o.CPU = opts.CPU + i
		g.eps = append(g.eps, newEndpoint(l, o, g))
	}
	return g
}

// Endpoints returns the group's endpoints, one per link.
func (g *Group) Endpoints() []*Endpoint { return g.eps }

// Addr is the address peers dial.
func (g *Group) Addr() netip.AddrPort { return g.eps[0].Addr() }

// Dial opens a session from the next endpoint in turn.
func (g *Group) Dial(ctx context.Context, addr string) (*Conn, error) {
	i := int(g.next.Add(1)) % len(g.eps)
	return g.eps[i].Dial(ctx, addr)
}

// DialTicket opens a session under ticket t from the next endpoint in turn.
func (g *Group) DialTicket(ctx context.Context, addr string, t *Ticket) (*Conn, error) {
	i := int(g.next.Add(1)) % len(g.eps)
	return g.eps[i].DialTicket(ctx, addr, t)
}

// Accept waits for a session a peer opened with any endpoint.
func (g *Group) Accept() (*Conn, error) { return g.AcceptContext(context.Background()) }

// AcceptContext is Accept that gives up when ctx ends.
func (g *Group) AcceptContext(ctx context.Context) (*Conn, error) {
	select {
	case c := <-g.accepts:
		return c, nil
	case <-g.done:
		return nil, fmt.Errorf("afxdp: accept on %v: %w", g.Addr(), ErrClosed)
	case <-ctx.Done():
		return nil, fmt.Errorf("afxdp: accept on %v: %w", g.Addr(), ctx.Err())
	}
}

// Stats sums the endpoints' counters.
func (g *Group) Stats() Stats {
	var s Stats
	for _, e := range g.eps {
		s.add(e.Stats())
	}
	return s
}

// Close closes every endpoint.
func (g *Group) Close() error {
	g.once.Do(func() { close(g.done) })
	var first error
	for _, e := range g.eps {
		if err := e.Close(); err != nil && first == nil {
			first = err
		}
	}
	discardAccepts(g.accepts)
	return first
}

// claim records e as key's owner, or returns the endpoint that already is.
func (g *Group) claim(key protocol.Key, e *Endpoint) (*Endpoint, bool) {
	v, loaded := g.owner.LoadOrStore(key, e)
	return v.(*Endpoint), !loaded
}

func (g *Group) ownerOf(key protocol.Key) *Endpoint {
	if v, ok := g.owner.Load(key); ok {
		return v.(*Endpoint)
	}
	return nil
}

func (g *Group) forget(key protocol.Key, e *Endpoint) { g.owner.CompareAndDelete(key, e) }

// inbox holds packets other reactors of a Group forwarded to this one, in
// buffers it recycles.
type inbox struct {
	mu   sync.Mutex
	pkts []forwarded
	free [][]byte
	take []forwarded // the reactor's batch being handled
	flag atomic.Bool
}

type forwarded struct {
	buf  []byte
	from netip.AddrPort
}

// forward copies a datagram into e's inbox and wakes e. Called by another
// endpoint's reactor.
func (e *Endpoint) forward(data []byte, from netip.AddrPort) {
	in := &e.inbox
	in.mu.Lock()
	var buf []byte
	if n := len(in.free); n > 0 {
		buf, in.free = in.free[n-1], in.free[:n-1]
	}
	in.pkts = append(in.pkts, forwarded{buf: append(buf[:0], data...), from: from})
	in.mu.Unlock()
	in.flag.Store(true)
	e.ctr.forwarded.Add(1)
	if e.sleeping.Load() {
		e.link.Wake()
	}
}

// handleInbox handles forwarded packets on e's reactor.
func (e *Endpoint) handleInbox() {
	in := &e.inbox
	in.mu.Lock()
	in.take, in.pkts = in.pkts, in.take[:0]
	in.flag.Store(false)
	in.mu.Unlock()
	for i := range in.take {
		f := &in.take[i]
		d := link.Datagram{Data: f.buf, From: f.from}
		e.handle(&d)
	}
	in.mu.Lock()
	for i := range in.take {
		in.free = append(in.free, in.take[i].buf)
		in.take[i] = forwarded{}
	}
	in.mu.Unlock()
}
