package rpc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

var mDefer = NewMethod("Defer")

// deferEnv serves mDefer, Deferrable, on a server with the given
// interceptors. The handler answers at once when the request is "now";
// otherwise it defers, if it can, and hands its answer to the test on
// answers, which answers it from its own goroutine; it reports on deferred
// whether it could defer.
type deferEnv struct {
	client   *Client
	deferred chan bool
	answers  chan deferredCall
}

type deferredCall struct {
	ctx    context.Context
	meta   []byte // a copy of the request
	resp   *Response
	answer func(error)
}

func newDeferEnv(t *testing.T, sics ...ServerInterceptor) *deferEnv {
	t.Helper()
	env := &deferEnv{deferred: make(chan bool, 16), answers: make(chan deferredCall, 16)}
	srv := NewServer()
	srv.Interceptors = sics
	srv.Register(mDefer, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		if string(req.Meta) == "now" {
			resp.Meta = append(resp.Meta, "answered at once"...)
			return nil
		}
		answer, ok := resp.Defer()
		if ok && string(req.Meta) == "before returning" {
			// The answer may come before the handler returns.
			resp.Meta = append(resp.Meta, "deferred, answered before returning"...)
			answer(nil)
			return ErrDeferred
		}
		env.deferred <- ok
		if !ok {
			resp.Meta = append(resp.Meta, "waited"...)
			return nil
		}
		env.answers <- deferredCall{ctx, append([]byte(nil), req.Meta...), resp, answer}
		return ErrDeferred
	}, HandlerOptions{Deferrable: true})
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	tr := tcpTransport()
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	env.client = NewClient(l.Addr().String(), ClientOptions{Transport: tr})
	t.Cleanup(func() { env.client.Close(); srv.Close() })
	return env
}

// call makes a call of mDefer with meta on a goroutine of its own and
// returns where its outcome arrives.
func (env *deferEnv) call(ctx context.Context, meta string) <-chan string {
	out := make(chan string, 1)
	go func() {
		var reply Reply
		defer reply.Release()
		if err := env.client.Call(ctx, mDefer, &Request{Meta: []byte(meta)}, &reply); err != nil {
			out <- "error: " + CodeOf(err).String()
			return
		}
		out <- string(reply.Meta)
	}()
	return out
}

func TestDeferredAnswer(t *testing.T) {
	env := newDeferEnv(t)
	if got := <-env.call(context.Background(), "now"); got != "answered at once" {
		t.Errorf("a deferrable handler answering at once: %q", got)
	}
	if got := <-env.call(context.Background(), "before returning"); got != "deferred, answered before returning" {
		t.Errorf("a handler answering before it returns: %q", got)
	}
	first, second := env.call(context.Background(), "first"), env.call(context.Background(), "second")
	var calls []deferredCall
	for range 2 {
		if !<-env.deferred {
			t.Fatal("Defer refused a Deferrable handler without interceptors")
		}
		calls = append(calls, <-env.answers)
	}
	// Other calls go on while the two wait for their answers.
	var reply Reply
	if err := env.client.Call(context.Background(), mEcho, &Request{Meta: []byte("x")}, &reply); err != nil || string(reply.Meta) != "x" {
		t.Fatalf("Echo while two answers are deferred = %q, %v", reply.Meta, err)
	}
	reply.Release()
	// Answered out of order, from goroutines other than the handlers'.
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		done := make(chan struct{})
		go func() {
			defer close(done)
			if string(c.meta) == "second" {
				c.answer(Errorf(wire.NotFound, "no %s", c.meta))
				return
			}
			c.resp.Meta = append(c.resp.Meta, "deferred "...)
			c.resp.Meta = append(c.resp.Meta, c.meta...)
			c.answer(nil)
		}()
		<-done
	}
	if got := <-first; got != "deferred first" {
		t.Errorf("first call = %q", got)
	}
	if got := <-second; got != "error: "+wire.NotFound.String() {
		t.Errorf("second call = %q, want its handler's error", got)
	}
}

// TestDeferredAnswerCallerGivesUp: a caller that gives up ends the
// handler's context, whose answer then still finishes the call, and the
// connection serves on.
func TestDeferredAnswerCallerGivesUp(t *testing.T) {
	env := newDeferEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	out := env.call(ctx, "late")
	<-env.deferred
	c := <-env.answers
	select {
	case <-c.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end when its caller gave up")
	}
	c.answer(c.ctx.Err())
	if got := <-out; got != "error: "+wire.DeadlineExceeded.String() {
		t.Errorf("call = %q, want DeadlineExceeded", got)
	}
	if got := <-env.call(context.Background(), "now"); got != "answered at once" {
		t.Errorf("next call = %q", got)
	}
}

// TestDeferredBehindInterceptors: behind interceptors the handler cannot
// defer, and answers as an ordinary one.
func TestDeferredBehindInterceptors(t *testing.T) {
	seen := make(chan string, 1)
	env := newDeferEnv(t, func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response, next ServerHandler) error {
		seen <- info.Method.Name
		return next(ctx, info, req, resp)
	})
	out := env.call(context.Background(), "later")
	if <-env.deferred {
		t.Error("Defer allowed behind interceptors, which would see no answer")
	}
	if got := <-out; got != "waited" {
		t.Errorf("call = %q", got)
	}
	if got := <-seen; got != mDefer.Name {
		t.Errorf("interceptor saw %q", got)
	}
}

// TestDeferRefusedElsewhere: a handler of an ordinary method cannot
// defer; it answers as it returns.
func TestDeferRefusedElsewhere(t *testing.T) {
	var r Response
	if _, ok := r.Defer(); ok {
		t.Error("Defer allowed on a Response no call made")
	}
	srv := NewServer()
	refused := make(chan bool, 2)
	for _, opts := range []HandlerOptions{{}, {Inline: true}} {
		m := NewMethod(fmt.Sprintf("Plain%v", opts.Inline))
		srv.Register(m, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
			_, ok := resp.Defer()
			refused <- !ok
			return nil
		}, opts)
	}
	tr := tcpTransport()
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	c := NewClient(l.Addr().String(), ClientOptions{Transport: tr})
	defer func() { c.Close(); srv.Close() }()
	for _, inline := range []bool{false, true} {
		var reply Reply
		if err := c.Call(context.Background(), NewMethod(fmt.Sprintf("Plain%v", inline)), &Request{}, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
		if !<-refused {
			t.Errorf("Defer allowed in a handler with Inline %v", inline)
		}
	}
}
