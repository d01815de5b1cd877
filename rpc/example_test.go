package rpc_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

func Example() {
	srv := rpc.NewServer()
	echo := rpc.NewMethod("Echo")
	srv.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...) // a copy: req goes back to its pool
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()

	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer client.Close()
	var reply rpc.Reply
	if err := client.Call(context.Background(), echo, &rpc.Request{Meta: []byte("hello")}, &reply); err != nil {
		panic(err)
	}
	defer reply.Release()
	fmt.Printf("%s\n", reply.Meta)
	// Output: hello
}

// Interceptors wrap every call of a Client and every handler of a Server,
// the first outermost, as gRPC's unary interceptors do: here the client
// attaches a token and the server checks it before the handler runs. The
// server's are chained as each method is registered, so they are set first.
func ExampleServer_interceptors() {
	hello := rpc.NewMethod("Hello")
	srv := rpc.NewServer()
	srv.Interceptors = []rpc.ServerInterceptor{
		func(ctx context.Context, info *rpc.ServerInfo, req *wire.Inbound, resp *rpc.Response, next rpc.ServerHandler) error {
			if !bytes.HasPrefix(req.Meta, []byte("token ")) {
				return status.Errorf(wire.Unauthenticated, "no token")
			}
			fmt.Printf("server: %s over %s\n", info.Method.Name, info.Path)
			return next(ctx, info, req, resp)
		},
	}
	srv.Register(hello, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(append(resp.Meta, "hello, "...), bytes.TrimPrefix(req.Meta, []byte("token "))...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()

	token := func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
		req.Meta = append([]byte("token "), req.Meta...)
		err := invoke(ctx, info, req, reply)
		fmt.Printf("client: %s over %s: %v\n", info.Method.Name, info.Path, err)
		return err
	}
	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}, Interceptors: []rpc.ClientInterceptor{token}})
	defer client.Close()
	var reply rpc.Reply
	if err := client.Call(context.Background(), hello, &rpc.Request{Meta: []byte("world")}, &reply); err != nil {
		panic(err)
	}
	defer reply.Release()
	fmt.Printf("%s\n", reply.Meta)
	// Output:
	// server: Hello over tcp
	// client: Hello over tcp: <nil>
	// hello, world
}

// A Deferrable handler that waits for another party's event returns at
// once and is answered by the event's goroutine (Response.Defer), rather
// than holding a goroutine of its own until then: here a Recv is answered
// by the Send that brings its value, whichever of the two comes first.
func ExampleResponse_Defer() {
	send, recv := rpc.NewMethod("Send"), rpc.NewMethod("Recv")
	var (
		mu      sync.Mutex
		value   []byte                   // sent before a Recv came for it
		waiting *rpc.Response            // a Recv that came first
		answer  func(error)              // and how to answer it
		arrived = make(chan struct{}, 1) // a Recv is waiting (for the example's order)
	)
	srv := rpc.NewServer()
	srv.Register(recv, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		mu.Lock()
		defer mu.Unlock()
		if value != nil {
			resp.Meta = append(resp.Meta, value...)
			return nil
		}
		a, ok := resp.Defer()
		if !ok {
			return status.Errorf(wire.Unimplemented, "Recv must be deferrable")
		}
		waiting, answer = resp, a
		arrived <- struct{}{}
		return rpc.ErrDeferred
	}, rpc.HandlerOptions{Deferrable: true})
	srv.Register(send, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		mu.Lock()
		defer mu.Unlock()
		if waiting == nil {
			value = append([]byte(nil), req.Meta...)
			return nil
		}
		waiting.Meta = append(waiting.Meta, req.Meta...) // a copy: req goes back to its pool
		answer(nil)
		waiting, answer = nil, nil
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()

	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer client.Close()
	got := make(chan string)
	go func() {
		var reply rpc.Reply
		if err := client.Call(context.Background(), recv, &rpc.Request{}, &reply); err != nil {
			panic(err)
		}
		got <- string(reply.Meta)
		reply.Release()
	}()
	<-arrived
	var reply rpc.Reply
	if err := client.Call(context.Background(), send, &rpc.Request{Meta: []byte("a tensor")}, &reply); err != nil {
		panic(err)
	}
	reply.Release()
	fmt.Println("Recv got", <-got)
	// Output: Recv got a tensor
}
