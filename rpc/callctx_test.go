package rpc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// TestDerivedContextOutlivesCall: a handler that derives a context from its
// own (context.WithCancel registers an AfterFunc on it) and returns once its
// caller cancels leaves the context package's goroutine running, which reads
// the call's context (Err, and Value for its cause) after the call ended. A
// pooled call must not be reused under it: under -race a reused context was
// reported written by the next call while that goroutine read it.
func TestDerivedContextOutlivesCall(t *testing.T) {
	m := NewMethod("DerivedContext")
	srv := NewServer()
	srv.Register(m, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		if string(req.Meta) == "quick" {
			return nil
		}
		// A helper works under a derived context and ends with it; the
		// handler itself waits on its own context.
		child, cancel := context.WithCancel(ctx)
		go func() {
			<-child.Done()
			cancel()
		}()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return nil
		}
	}, HandlerOptions{})
	l, err := tcpTransport().Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	c := NewClient(l.Addr().String(), ClientOptions{Transport: tcpTransport()})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r Reply
			if err := c.Call(ctx, m, &Request{Meta: []byte("wait")}, &r); err == nil {
				r.Release()
			}
		}()
		time.Sleep(200 * time.Microsecond) // paces the cancel to land while the call is on its way, at no fixed point
		cancel()                           // the server hears of it and cancels the handler's context
		// Quick calls reuse the pooled calls while the derived context's
		// goroutine may still run.
		for range 4 {
			qctx, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
			var r Reply
			if err := c.Call(qctx, m, &Request{Meta: []byte("quick")}, &r); err != nil {
				t.Fatalf("quick call %d: %v", i, err)
			}
			r.Release()
			qcancel()
		}
		wg.Wait()
	}
}
