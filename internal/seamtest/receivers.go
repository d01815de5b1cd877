package seamtest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// receiversWithin bounds the wait for the core to start receiving.
const receiversWithin = 10 * time.Second

// Receivers returns the receivers the core hands a client's connection and
// a server's, for a wrapper of a receiver to be checked against what it
// wraps. The client and server they belong to are closed: the receivers
// are for type assertions only.
func Receivers(tb testing.TB) (client, server wire.Receiver) {
	tb.Helper()
	srv := rpc.NewServer()
	sc := newCapture()
	srv.ServeConn(sc)
	server = sc.wait(tb, "the server")
	srv.Close()

	cc := newCapture()
	c := rpc.NewClient("capture", rpc.ClientOptions{Transport: captureTransport{cc}, Keepalive: rpc.Keepalive{Time: -1}})
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{})
	go func() {
		defer close(called)
		var r rpc.Reply
		c.Call(ctx, rpc.NewMethod("/seamtest/Capture"), &rpc.Request{}, &r)
		r.Release()
	}()
	client = cc.wait(tb, "the client")
	cancel()
	<-called
	c.Close()
	return client, server
}

// captureTransport dials its one connection.
type captureTransport struct{ c *capture }

func (t captureTransport) Name() string { return "capture" }
func (t captureTransport) Dial(context.Context, string) (rpc.Conn, error) {
	return t.c, nil
}
func (t captureTransport) Listen(string) (rpc.Listener, error) { return nil, net.ErrClosed }

// capture is a connection that hands on the receiver Receive is given,
// takes every message sent, and ends Receive once closed.
type capture struct {
	got    chan wire.Receiver
	closed chan struct{}
}

func newCapture() *capture {
	return &capture{got: make(chan wire.Receiver, 1), closed: make(chan struct{})}
}

func (c *capture) Send(m *wire.Message) error {
	select {
	case <-c.closed:
		return rpc.ErrClosed
	default:
	}
	if m.Done != nil {
		m.Done.Sent(m, nil)
	}
	return nil
}

func (c *capture) Receive(r wire.Receiver) error {
	c.got <- r
	<-c.closed
	return rpc.ErrClosed
}

func (c *capture) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

func (c *capture) LocalAddr() net.Addr  { return captureAddr{} }
func (c *capture) RemoteAddr() net.Addr { return captureAddr{} }

func (c *capture) wait(tb testing.TB, whose string) wire.Receiver {
	tb.Helper()
	select {
	case r := <-c.got:
		return r
	case <-time.After(receiversWithin):
		tb.Fatalf("seamtest: %s did not start receiving within %v", whose, receiversWithin)
		return nil
	}
}

type captureAddr struct{}

func (captureAddr) Network() string { return "capture" }
func (captureAddr) String() string  { return "capture" }
