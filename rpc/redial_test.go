package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/wire"
)

// A refused TLS 1.3 client learns of its refusal only after its own
// handshake is done, when the connection it has dialed already fails: the
// call reports the refusal, and neither it nor the next call dials again
// before the backoff has passed.
func TestRefusedClientDialsOnce(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	for round := range 8 {
		sf := ca.files(t, dir, "server")
		addr := tlsServer(t, sf)
		cfg, err := other.files(t, dir, "rogue", ca).ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		c := NewClient(addr, ClientOptions{Transport: &TCP{TLS: cfg}, FailFast: true, MinBackoff: time.Minute})
		for i := range 2 {
			var reply Reply
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.Call(ctx, mEcho, &Request{Meta: []byte("x")}, &reply)
			cancel()
			if CodeOf(err) != wire.Unavailable || !strings.Contains(err.Error(), "tls") {
				t.Fatalf("round %d, call %d: err = %v, want Unavailable with the TLS refusal", round, i, err)
			}
		}
		if n, st := sf.Refusals(), c.Stats(); n != 1 || st.Reconnects != 0 {
			t.Fatalf("round %d: the server refused %d connections, the client reconnected %d times; want 1 and 0", round, n, st.Reconnects)
		}
		c.Close()
	}
}

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
