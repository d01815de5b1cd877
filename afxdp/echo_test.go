package afxdp_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/wire"
)

// echoReceiver answers every frame with its metadata, from the reactor.
type echoReceiver struct{ c *afxdp.Conn }

func (e echoReceiver) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }

func (e echoReceiver) Deliver(in *wire.Inbound) {
	m := &wire.Message{Header: wire.Header{Kind: wire.KindResponse, CallID: in.Header.CallID}, Meta: slices.Clone(in.Meta)}
	in.Release()
	e.c.Send(m)
}

// echoServer is an Endpoint or a Group whose sessions serveEcho answers.
type echoServer interface {
	Accept() (*afxdp.Conn, error)
	Close() error
}

// serveEcho answers every frame of every session srv accepts with its
// metadata, as an rpc server's inline handler would. At the end of the
// test it closes srv and waits for its goroutines: call it before
// registering a cleanup that must run before srv closes.
func serveEcho(t testing.TB, srv echoServer) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Receive(echoReceiver{c})
			}()
		}
	}()
	t.Cleanup(func() { srv.Close(); wg.Wait() })
}

// echoDialer is an Endpoint or a Group.
type echoDialer interface {
	Dial(ctx context.Context, addr string) (*afxdp.Conn, error)
}

// echoClient makes calls, one at a time, to a session serveEcho answers.
type echoClient struct {
	c       *afxdp.Conn
	replies *collector
	id      uint64
}

// dialEcho opens a session from d to serveEcho's server at addr; it closes
// at the end of the test.
func dialEcho(t testing.TB, d echoDialer, addr string) *echoClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := d.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	e := &echoClient{c: c, replies: newCollector(1)}
	received := make(chan struct{})
	go func() {
		defer close(received)
		c.Receive(e.replies)
	}()
	t.Cleanup(func() { c.Close(); <-received })
	return e
}

// call sends meta and waits, up to within, for its answer, which must be
// the same metadata under the same call ID.
func (e *echoClient) call(meta []byte, within time.Duration) error {
	e.id++
	m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: e.id}, Meta: meta}
	if err := e.c.Send(m); err != nil {
		return fmt.Errorf("send %.32q: %w", meta, err)
	}
	select {
	case in := <-e.replies.frames:
		defer in.Release()
		if in.Err != nil || in.Header.CallID != e.id || !bytes.Equal(in.Meta, meta) {
			return fmt.Errorf("call %d (%.32q) answered by call %d: %.32q, %v", e.id, meta, in.Header.CallID, in.Meta, in.Err)
		}
		return nil
	case <-time.After(within):
		return fmt.Errorf("call %d (%.32q) not answered within %v", e.id, meta, within)
	}
}
