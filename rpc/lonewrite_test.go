package rpc

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// TestLoneRequestSkipsReactor: a request queued while long calls are in
// flight, with no caller woken by an answer about to queue another, is
// written by its caller at once. The client's reactor never runs here, so
// a request left to it would never leave.
func TestLoneRequestSkipsReactor(t *testing.T) {
	srv := NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	mHold := NewMethod("Hold")
	started, release := make(chan struct{}, 2), make(chan struct{})
	srv.Register(mHold, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		started <- struct{}{}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, HandlerOptions{})
	l, err := (&TCP{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	stalled := &Reactors{rs: []*reactor{{wake: make(chan struct{}, 1), quit: make(chan struct{})}}}
	c := NewClient(l.Addr().String(), ClientOptions{Transport: &TCP{Reactors: stalled}})
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	echo := func(b byte) error {
		var reply Reply
		if err := c.Call(ctx, mEcho, &Request{Meta: []byte{b}}, &reply); err != nil {
			return err
		}
		defer reply.Release()
		if len(reply.Meta) != 1 || reply.Meta[0] != b {
			t.Errorf("echo of %d answered %v", b, reply.Meta)
		}
		return nil
	}
	// The connection is up and its receiving goroutine runs.
	if err := echo(1); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 2)
	for range 2 {
		go func() {
			var reply Reply
			err := c.Call(ctx, mHold, &Request{}, &reply)
			if err == nil {
				reply.Release()
			}
			held <- err
		}()
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("a held call never reached its handler")
		}
	}
	// Two answers are due, so the echo's request used to go to the reactor.
	if err := echo(2); err != nil {
		t.Fatalf("echo with two calls held: %v", err)
	}
	close(release)
	for range 2 {
		if err := <-held; err != nil {
			t.Error(err)
		}
	}
}
