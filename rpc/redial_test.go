package rpc

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/wire"
)

// A peer that closes every connection at once is dialed at the backoff's
// pace, however many callers keep calling it. On fake time: the dials
// come exactly when the backoff says, however slow the machine.
func TestDeadPeerDialedAtBackoffPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &closingTransport{}
		c := NewClient("198.18.0.1:1", ClientOptions{Transport: tr})
		defer c.Close()
		const window = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), window)
		defer cancel()
		var wg sync.WaitGroup
		var calls atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10_000 && ctx.Err() == nil; i++ {
					var reply Reply
					err := c.Call(ctx, mEcho, &Request{Meta: []byte("x")}, &reply)
					if err == nil {
						t.Error("a call succeeded on a connection that failed at once")
						return
					}
					if code := CodeOf(err); code != wire.Unavailable && code != wire.DeadlineExceeded {
						t.Errorf("err = %v, want Unavailable or DeadlineExceeded", err)
						return
					}
					calls.Add(1)
				}
			}()
		}
		wg.Wait()
		// Backoff from 10 ms, doubling: dials at 0, 10, 30, 70 and 150
		// ms; the next would be at 310.
		if n := tr.dials.Load(); n != 5 {
			t.Errorf("%d dials in %v by %d calls, want 5 (the backoff's pace)", n, window, calls.Load())
		}
	})
}

// closingTransport dials connections that have failed before anything
// arrives, as a peer that accepts and closes at once.
type closingTransport struct{ dials atomic.Int64 }

func (*closingTransport) Name() string { return "closing" }

func (t *closingTransport) Dial(ctx context.Context, addr string) (Conn, error) {
	t.dials.Add(1)
	return closedConn{}, nil
}

func (*closingTransport) Listen(string) (Listener, error) {
	return nil, errors.New("closing transport: no listening")
}

type closedConn struct{}

var errClosedAtOnce = errors.New("peer closed the connection at once")

func (closedConn) Send(*wire.Message) error    { return errClosedAtOnce }
func (closedConn) Receive(wire.Receiver) error { return errClosedAtOnce }
func (closedConn) Close() error                { return nil }
func (closedConn) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (closedConn) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
