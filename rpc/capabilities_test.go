package rpc

import (
	"context"
	"sync"
	"testing"

	"github.com/starwire/starwire/internal/readside"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

// twoNames is a transport over TCP whose connections name a path per
// request, "even" and "odd" in turn, as a transport with two paths does,
// and forward the TCP connection's self-read on purpose: the shape of a
// wrapper outside this package, written against the seam.
type twoNames struct {
	Transport
	conns []*namingConn // dialed, one at a time
}

func (t *twoNames) Dial(ctx context.Context, addr string) (Conn, error) {
	c, err := t.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	nc := &namingConn{Conn: c, Reader: c.(readside.Reader), w: c.(Withdrawer), p: c.(ProgressConn)}
	t.conns = append(t.conns, nc)
	return nc, nil
}

type namingConn struct {
	Conn
	readside.Reader
	w    Withdrawer
	p    ProgressConn
	mu   sync.Mutex
	sent int
	// Turns at the read side a caller took, and those taken while the
	// last request sent was odd: with one caller at a time, those are
	// callers that did not hand the read side back.
	turns, oddTurns int
}

func (c *namingConn) turn() {
	c.mu.Lock()
	c.turns++
	if c.sent%2 == 0 && c.sent > 0 {
		c.oddTurns++
	}
	c.mu.Unlock()
}

func (c *namingConn) ReadTurn(r wire.Receiver) error {
	c.turn()
	return c.Reader.ReadTurn(r)
}

func (c *namingConn) ReadTurnUntil(r wire.Receiver) (bool, error) {
	c.turn()
	return c.Reader.ReadTurnUntil(r)
}

// What namingConn forwards of the TCP connection's capabilities: all of
// them (internal/seamtest, which checks the module's other wrappers,
// imports rpc, so rpc's own tests cannot use it).
var (
	_ PathSender      = (*namingConn)(nil)
	_ readside.Reader = (*namingConn)(nil)
	_ Withdrawer      = (*namingConn)(nil)
	_ ProgressConn    = (*namingConn)(nil)
)

func (c *namingConn) Withdraw(m *wire.Message) Withdrawal { return c.w.Withdraw(m) }
func (c *namingConn) Progress() (in, out uint64)          { return c.p.Progress() }

func (c *namingConn) SendPath(m *wire.Message) (netpath.Path, error) {
	path := netpath.TCP
	if m.Header.Kind == wire.KindRequest {
		c.mu.Lock()
		path = [2]netpath.Path{"even", "odd"}[c.sent%2]
		c.sent++
		c.mu.Unlock()
	}
	return path, c.Conn.Send(m)
}

// Answers says the read side lent carries the answers of "even" requests
// only, so a caller that sent an "odd" one hands it back and the
// receiving goroutine reads that answer.
func (c *namingConn) Answers(path string) bool { return path == "even" }

// TestClientInfoPathIsTheCallsPath: a client interceptor sees the path the
// connection reported for each call's request, not one for the
// connection, and calls whose answers come where the caller's read side is
// not still complete, sequential and concurrent.
func TestClientInfoPathIsTheCallsPath(t *testing.T) {
	srv := NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	l, err := tcpTransport().Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	var mu sync.Mutex
	seen := map[netpath.Path]int{}
	tr := &twoNames{Transport: tcpTransport()}
	c := NewClient(l.Addr().String(), ClientOptions{Transport: tr, Interceptors: []ClientInterceptor{
		func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply, invoke Invoker) error {
			err := invoke(ctx, info, req, reply)
			mu.Lock()
			seen[info.Path]++
			mu.Unlock()
			return err
		}}})
	t.Cleanup(func() { c.Close(); srv.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call := func(ctx context.Context) {
		var r Reply
		if err := c.Call(ctx, mEcho, &Request{Meta: []byte("x")}, &r); err != nil {
			t.Error(err)
		}
		r.Release()
	}
	for range 50 {
		call(context.Background()) // the caller reads its own answer when it may
		call(ctx)                  // under watch
	}
	if len(tr.conns) != 1 {
		t.Fatalf("%d connections dialed, want 1", len(tr.conns))
	}
	nc := tr.conns[0]
	nc.mu.Lock()
	if nc.turns == 0 || nc.oddTurns != 0 {
		t.Errorf("callers read %d times, %d of them after an odd request: want some, none", nc.turns, nc.oddTurns)
	}
	nc.mu.Unlock()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				call(ctx)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if seen["even"] != 100 || seen["odd"] != 100 || len(seen) != 2 {
		t.Errorf("paths seen %v, want 100 even and 100 odd", seen)
	}
}
