package rpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// sinkConn is a Conn whose peer sends the requests it was made with, all at
// once, and then either takes every answer (reads) or none: answers not
// taken stay queued, their memory the server's, until Close fails them. It
// has no Throttle to ask, as a packet transport's reactor does not: the
// core server alone has to hold the connection's calls back.
type sinkConn struct {
	reqs  []*wire.Inbound
	reads bool
	port  int

	mu       sync.Mutex
	unsent   []*wire.Message
	answered int // answers taken
	closed   bool
	done     chan struct{}
}

func newSinkConn(port int, reads bool, method uint32, calls int, meta []byte) *sinkConn {
	return newSinkConnClaiming(port, reads, method, calls, meta, 0)
}

// newSinkConnClaiming is newSinkConn with requests whose headers claim
// payload bytes each (counted as held by their calls, though no tensor
// comes).
func newSinkConnClaiming(port int, reads bool, method uint32, calls int, meta []byte, payload uint64) *sinkConn {
	c := &sinkConn{reads: reads, port: port, done: make(chan struct{})}
	for i := range calls {
		h := wire.Header{Kind: wire.KindRequest, Method: method, CallID: uint64(i + 1), MetaLen: uint32(len(meta)), PayloadLen: payload}
		in := wire.NewInbound()
		copy(in.Begin(&h), meta)
		c.reqs = append(c.reqs, in)
	}
	return c
}

func (c *sinkConn) Send(m *wire.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closed:
		return ErrClosed
	case m.Done == nil: // a frame of the server's own, such as GoAway
	case c.reads:
		c.answered++
		go m.Done.Sent(m, nil)
	default:
		c.unsent = append(c.unsent, m)
	}
	return nil
}

func (c *sinkConn) Receive(r wire.Receiver) error {
	for _, in := range c.reqs {
		r.Deliver(in)
	}
	c.reqs = nil
	<-c.done
	return ErrClosed
}

func (c *sinkConn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	unsent := c.unsent
	c.unsent = nil
	c.mu.Unlock()
	close(c.done)
	for _, m := range unsent {
		m.Done.Sent(m, ErrClosed)
	}
	return nil
}

// queuedBytes is what the answers waiting for the peer hold.
func (c *sinkConn) queuedBytes() (n int64, answers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.unsent {
		n += answerBytes(m)
	}
	return n, len(c.unsent)
}

func (c *sinkConn) LocalAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
}
func (c *sinkConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: c.port}
}

// serverConnOf returns the server's connection for c.
func serverConnOf(srv *Server, c Conn) *serverConn {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for sc := range srv.conns {
		if sc.conn == c {
			return sc
		}
	}
	return nil
}

// TestAnswersWithinSendBudget: a peer starts 100 calls whose handlers each
// answer 16 MiB, all of them before any answer exists, and reads none of
// the answers. The server holds at most SendBudget plus one answer for it,
// made or reserved, whether the handlers run on goroutines of their own
// (making their answers in Response.NewBuffer, which waits for the budget)
// or inline (whose later calls the server holds back). Beside it, another
// peer's small calls are all answered; once the first peer closes, every
// one of its calls is answered and every byte let go.
//
// Nothing here is about time: synctest.Wait says when every goroutine
// has done what it can.
func TestAnswersWithinSendBudget(t *testing.T) {
	for _, inline := range []bool{false, true} {
		name := "goroutine"
		if inline {
			name = "inline"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testAnswersWithinSendBudget(t, inline) })
		})
	}
}

func testAnswersWithinSendBudget(t *testing.T, inline bool) {
	const calls, answer, budget = 100, 16 << 20, DefaultSendBudget
	srv := NewServer()
	defer srv.Close()
	gen, small := NewMethod("BudgetGen"), NewMethod("BudgetSmall")
	var made atomic.Int64
	srv.Register(gen, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		buf, err := resp.NewBuffer(ctx, answer)
		if err != nil {
			return err
		}
		made.Add(1)
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{answer}, Data: buf.Bytes(), Buf: buf})
		return nil
	}, HandlerOptions{Inline: inline})
	srv.Register(small, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{})

	hog := newSinkConn(1000, false, gen.ID, calls, nil)
	srv.ServeConn(hog)
	synctest.Wait()
	other := newSinkConn(1001, true, small.ID, calls, []byte("small"))
	srv.ServeConn(other)
	synctest.Wait()

	sc := serverConnOf(srv, hog)
	queued, answers := hog.queuedBytes()
	t.Logf("%d answers made, %d queued (%d MiB), %d MiB counted, %d calls held back",
		made.Load(), answers, queued>>20, sc.answering.Load()>>20, sc.queued.Load())
	// The peer takes no answer, so every answer made is still held.
	if p := made.Load() * answer; p > budget+answer {
		t.Errorf("answers made for a peer that reads none hold %d MiB, over SendBudget + one answer (%d MiB)", p>>20, (budget+answer)>>20)
	}
	if a := sc.answering.Load(); a > budget+answer+wire.HeaderSize*calls {
		t.Errorf("%d MiB of answers counted, over SendBudget + one answer", a>>20)
	}
	if made.Load() >= calls {
		t.Errorf("all %d answers made for a peer that reads none", calls)
	}
	other.mu.Lock()
	if other.answered != calls {
		t.Errorf("the other peer had %d of its %d calls answered", other.answered, calls)
	}
	other.mu.Unlock()

	hog.Close()
	synctest.Wait()
	if a := sc.answering.Load(); a != 0 {
		t.Errorf("%d answer bytes still counted after the peer closed", a)
	}
	if n := srv.active.Load(); n != 0 {
		t.Errorf("%d calls still in progress after the peer closed", n)
	}
}

// TestAnswersWithinSendBudgetTCP: the same peer over TCP, its 100
// requests in one write, its handlers on goroutines of their own making
// 16 MiB answers in Response.NewBuffer: once every call read has made its
// answer or waits, the answers made are within SendBudget plus one, and
// closing the peer answers every call it started.
func TestAnswersWithinSendBudgetTCP(t *testing.T) {
	const calls, answer, budget = 100, 16 << 20, DefaultSendBudget
	srv := NewServer()
	defer srv.Close()
	gen := NewMethod("BudgetGenTCP")
	var made atomic.Int64
	srv.Register(gen, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		buf, err := resp.NewBuffer(ctx, answer)
		if err != nil {
			return err
		}
		made.Add(1)
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{answer}, Data: buf.Bytes(), Buf: buf})
		return nil
	}, HandlerOptions{})
	l, err := tcpTransport().Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	var reqs []byte
	for i := range calls {
		reqs = append(reqs, rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: gen.ID, CallID: uint64(i + 1)}})...)
	}
	if _, err := nc.Write(reqs); err != nil {
		t.Fatal(err)
	}
	// Every call read has made its answer, waits to make it, or is held
	// back, and the reader has read every call or waits for room.
	sc := waitServerConn(t, srv, func(sc *serverConn) bool {
		inProgress := sc.running.Load()
		return sc.reserving.Load()+sc.queued.Load() == inProgress &&
			(sc.waiting.Load() || int64(inProgress)+made.Load() == calls)
	})
	t.Logf("%d answers made, %d handlers waiting for budget, %d calls held back, %d MiB counted",
		made.Load(), sc.reserving.Load(), sc.queued.Load(), sc.answering.Load()>>20)
	if p := made.Load() * answer; p > budget+answer {
		t.Errorf("answers made for a peer that reads none hold %d MiB, over SendBudget + one answer (%d MiB)", p>>20, (budget+answer)>>20)
	}
	nc.Close()
	testwait.Eventually(t, 10*time.Second, func() bool { return srv.active.Load() == 0 },
		"the %d calls of the closed peer to be answered", srv.active.Load())
}

// TestHeldBackWithinRecvBudget: over a transport that cannot stop reading,
// the requests a peer that reads no answers has held back stay within
// RecvBudget: past it, its calls fail at once with ResourceExhausted.
func TestHeldBackWithinRecvBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const calls, answer, request, recvBudget = 100, 16 << 20, 1 << 20, 16 << 20
		srv := NewServer()
		srv.RecvBudget = recvBudget
		defer srv.Close()
		gen := NewMethod("BudgetGenHeld")
		srv.Register(gen, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
			buf, err := resp.NewBuffer(ctx, answer)
			if err != nil {
				return err
			}
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{answer}, Data: buf.Bytes(), Buf: buf})
			return nil
		}, HandlerOptions{Inline: true})
		hog := newSinkConnClaiming(1000, false, gen.ID, calls, nil, request)
		srv.ServeConn(hog)
		synctest.Wait()
		sc := serverConnOf(srv, hog)
		refused := 0
		hog.mu.Lock()
		for _, m := range hog.unsent {
			if m.Header.Kind == wire.KindError && m.Header.Status == wire.ResourceExhausted {
				refused++
			}
		}
		hog.mu.Unlock()
		t.Logf("%d calls held back holding %d MiB of requests, %d refused", sc.queued.Load(), sc.held.Load()>>20, refused)
		if h := sc.held.Load(); h > recvBudget+request {
			t.Errorf("requests in progress hold %d MiB, over RecvBudget %d MiB and one request", h>>20, recvBudget>>20)
		}
		if refused == 0 {
			t.Error("no call refused past RecvBudget")
		}
		hog.Close()
		synctest.Wait()
		if n := srv.active.Load(); n != 0 {
			t.Errorf("%d calls still in progress after the peer closed", n)
		}
	})
}
