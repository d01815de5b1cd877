package rpctest

import (
	"errors"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// Conn is the part of rpc.Conn that CheckClosed uses (rpctest imports
// nothing of rpc, so that rpc's own tests can use it).
type Conn interface {
	Send(m *wire.Message) error
	Receive(r wire.Receiver) error
	Close() error
}

// closedWithin bounds each wait of CheckClosed: a transport that never
// ends its Receive, or never completes a send, fails the test instead of
// hanging it.
const closedWithin = 10 * time.Second

// CheckClosed checks the contract of rpc.ErrClosed, passed as closed, on
// a and b, the two ends of one connection, neither receiving yet: a
// message a sends just before it closes completes with nil or an error
// wrapping closed; after a's Close, a's Send and a's Receive return errors
// wrapping closed; b's Receive then ends, as its peer went away, with one
// wrapping closed, and so does b's Send after that.
func CheckClosed(tb testing.TB, a, b Conn, closed error) {
	tb.Helper()
	recvA, recvB := receive(a), receive(b)
	sent := make(sentCh, 1)
	m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: make([]byte, 64<<10), Done: sent}
	if err := a.Send(m); err != nil {
		tb.Fatalf("Send before Close: %v", err)
	}
	if err := a.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	if err := wait(tb, sent, "the completion of a send made before Close"); err != nil && !errors.Is(err, closed) {
		tb.Errorf("a send made before Close completed with %v, which does not wrap %v", err, closed)
	}
	after := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 2}, Done: sent}
	if err := a.Send(after); !errors.Is(err, closed) {
		tb.Errorf("Send after Close: %v, want an error wrapping %v", err, closed)
	}
	if err := wait(tb, recvA, "Receive to return after Close"); !errors.Is(err, closed) {
		tb.Errorf("Receive after Close: %v, want an error wrapping %v", err, closed)
	}
	if err := wait(tb, recvB, "the peer's Receive to end"); !errors.Is(err, closed) {
		tb.Errorf("the peer's Receive: %v, want an error wrapping %v", err, closed)
	}
	if err := b.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 3}}); !errors.Is(err, closed) {
		tb.Errorf("the peer's Send after its Receive ended: %v, want an error wrapping %v", err, closed)
	}
	b.Close()
}

// sentCh is a wire.Completion that hands on the error.
type sentCh chan error

func (c sentCh) Sent(_ *wire.Message, err error) {
	select {
	case c <- err:
	default:
	}
}

// receive runs c's Receive, discarding what arrives, and hands on its end.
func receive(c Conn) chan error {
	done := make(chan error, 1)
	go func() { done <- c.Receive(discard{}) }()
	return done
}

func wait(tb testing.TB, c chan error, what string) error {
	tb.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(closedWithin):
		tb.Fatalf("waited %v for %s", closedWithin, what)
		return nil
	}
}

// discard is a Receiver that takes frames without tensors and drops them.
type discard struct{}

func (discard) Alloc(in *wire.Inbound) error {
	if len(in.Tensors) > 0 {
		return errors.New("rpctest: discard takes no tensors")
	}
	return nil
}

func (discard) Deliver(in *wire.Inbound) { in.Release() }

// A Dialing is a client connection being dialed on a goroutine of its
// own: a TLS client's dial waits for the server's handshake, which runs in
// the server's Receive, so the server's end must be receiving before the
// client's exists.
type Dialing struct {
	done chan struct{}
	c    Conn
	err  error
}

// Dial starts dial on a goroutine of its own.
func Dial(dial func() (Conn, error)) *Dialing {
	d := &Dialing{done: make(chan struct{})}
	go func() {
		defer close(d.done)
		d.c, d.err = dial()
	}()
	return d
}

// Conn waits, at most closedWithin, for the dial to end, and returns what
// it returned.
func (d *Dialing) Conn() (Conn, error) {
	select {
	case <-d.done:
		return d.c, d.err
	case <-time.After(closedWithin):
		return nil, errors.New("rpctest: the dial did not end")
	}
}

// CheckClosedDialing is CheckClosed on d, once dialed, and srv, the
// server's end of its connection, with the client's end closing when
// clientCloses: srv receives (and a TLS server's handshake runs) while d
// is still being dialed, and its Send and Close wait for the dial, since a
// handshake the server ended would fail the dial and leave no client's
// end to check.
func CheckClosedDialing(tb testing.TB, d *Dialing, srv Conn, clientCloses bool, closed error) {
	tb.Helper()
	cli, s := dialed{d}, dialedFirst{Conn: srv, d: d}
	if clientCloses {
		CheckClosed(tb, cli, s, closed)
	} else {
		CheckClosed(tb, s, cli, closed)
	}
	if _, err := d.Conn(); err != nil {
		tb.Errorf("dial: %v", err)
	}
}

// dialed is a Dialing's connection; its methods wait for the dial and fail
// as it failed.
type dialed struct{ d *Dialing }

func (c dialed) conn() Conn {
	cc, err := c.d.Conn()
	if err != nil {
		return failed{err}
	}
	return cc
}

func (c dialed) Send(m *wire.Message) error    { return c.conn().Send(m) }
func (c dialed) Receive(r wire.Receiver) error { return c.conn().Receive(r) }
func (c dialed) Close() error                  { return c.conn().Close() }

// dialedFirst is the server's end of a Dialing's connection.
type dialedFirst struct {
	Conn
	d *Dialing
}

func (c dialedFirst) Send(m *wire.Message) error {
	c.d.Conn()
	return c.Conn.Send(m)
}

func (c dialedFirst) Close() error {
	c.d.Conn()
	return c.Conn.Close()
}

// failed is a connection whose dial failed with err.
type failed struct{ err error }

func (c failed) Send(*wire.Message) error    { return c.err }
func (c failed) Receive(wire.Receiver) error { return c.err }
func (c failed) Close() error                { return nil }
