package rpc

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/starwire/starwire/wire"
)

// interceptedEnv serves Echo on a server with the given interceptors and
// returns a client with its own.
func interceptedEnv(t testing.TB, sics []ServerInterceptor, cics []ClientInterceptor) *Client {
	t.Helper()
	srv := NewServer()
	srv.Interceptors = sics
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	srv.Register(mSleep, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{})
	tr := tcpTransport()
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	c := NewClient(l.Addr().String(), ClientOptions{Transport: tr, Interceptors: cics})
	t.Cleanup(func() { c.Close(); srv.Close() })
	return c
}

func TestInterceptorsRunInOrder(t *testing.T) {
	var mu sync.Mutex
	var trace []string
	record := func(s string) {
		mu.Lock()
		trace = append(trace, s)
		mu.Unlock()
	}
	client := func(name string) ClientInterceptor {
		return func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply, invoke Invoker) error {
			record(name + " before " + info.Method.Name + " path=" + string(info.Path))
			err := invoke(ctx, info, req, reply)
			record(name + " after path=" + string(info.Path) + " reply=" + string(reply.Meta))
			return err
		}
	}
	server := func(name string) ServerInterceptor {
		return func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response, next ServerHandler) error {
			record(name + " before " + info.Method.Name + " path=" + string(info.Path))
			if info.Peer == nil {
				t.Error("no peer address in ServerInfo")
			}
			err := next(ctx, info, req, resp)
			record(name + " after resp=" + string(resp.Meta))
			return err
		}
	}
	c := interceptedEnv(t, []ServerInterceptor{server("s1"), server("s2")}, []ClientInterceptor{client("c1"), client("c2")})
	for _, m := range []Method{mEcho, mSleep} {
		trace = nil
		var reply Reply
		if err := c.Call(context.Background(), m, &Request{Meta: []byte("hi")}, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
		want := []string{
			"c1 before " + m.Name + " path=",
			"c2 before " + m.Name + " path=",
			"s1 before " + m.Name + " path=tcp",
			"s2 before " + m.Name + " path=tcp",
			"s2 after resp=hi",
			"s1 after resp=hi",
			"c2 after path=tcp reply=hi",
			"c1 after path=tcp reply=hi",
		}
		if strings.Join(trace, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: trace\n%s\nwant\n%s", m.Name, strings.Join(trace, "\n"), strings.Join(want, "\n"))
		}
	}
}

// An interceptor that answers without calling on: the client's refuses
// before anything is sent, the server's (say, auth) before the handler runs,
// and its status reaches the caller.
func TestInterceptorsShortCircuit(t *testing.T) {
	var handled atomic.Bool
	deny := func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response, next ServerHandler) error {
		if string(req.Meta) != "token" {
			return Errorf(wire.PermissionDenied, "%s: bad token", info.Method.Name)
		}
		handled.Store(true)
		return next(ctx, info, req, resp)
	}
	refuse := func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply, invoke Invoker) error {
		if len(req.Meta) == 0 {
			return Errorf(wire.InvalidArgument, "empty request")
		}
		return invoke(ctx, info, req, reply)
	}
	c := interceptedEnv(t, []ServerInterceptor{deny}, []ClientInterceptor{refuse})
	var reply Reply
	err := c.Call(context.Background(), mEcho, &Request{Meta: []byte("guess")}, &reply)
	if CodeOf(err) != wire.PermissionDenied || !strings.Contains(err.Error(), "bad token") {
		t.Fatalf("denied call: err = %v, want PermissionDenied with the interceptor's message", err)
	}
	if handled.Load() {
		t.Fatal("the handler ran for a denied call")
	}
	if err := c.Call(context.Background(), mEcho, &Request{}, &reply); CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("refused call: err = %v, want InvalidArgument", err)
	}
	if err := c.Call(context.Background(), mEcho, &Request{Meta: []byte("token")}, &reply); err != nil || string(reply.Meta) != "token" {
		t.Fatalf("allowed call: %q, %v", reply.Meta, err)
	}
	reply.Release()
	var st *Status
	if err := c.Call(context.Background(), mEcho, &Request{Meta: []byte("x")}, &reply); !errors.As(err, &st) {
		t.Fatalf("err = %v, want a *Status inside", err)
	}
}

// Interceptors that only look cost no allocation per call: the chains are
// built once and the info they are handed is pooled.
func TestInterceptedCallAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are asserted in the run without -race")
	}
	var calls, handled atomic.Int64
	cic := func(ctx context.Context, info *ClientInfo, req *Request, reply *Reply, invoke Invoker) error {
		calls.Add(1)
		return invoke(ctx, info, req, reply)
	}
	sic := func(ctx context.Context, info *ServerInfo, req *wire.Inbound, resp *Response, next ServerHandler) error {
		handled.Add(1)
		return next(ctx, info, req, resp)
	}
	c := interceptedEnv(t, []ServerInterceptor{sic, sic}, []ClientInterceptor{cic, cic})
	req := Request{Meta: make([]byte, 64)}
	var reply Reply
	call := func() {
		if err := c.Call(context.Background(), mEcho, &req, &reply); err != nil {
			t.Fatal(err)
		}
		reply.Release()
	}
	for range 100 {
		call()
	}
	if n := testing.AllocsPerRun(500, call); n > 0 {
		t.Fatalf("an intercepted call allocates %v times (both ends)", n)
	}
	if calls.Load() == 0 || handled.Load() == 0 {
		t.Fatal("the interceptors did not run")
	}
}
