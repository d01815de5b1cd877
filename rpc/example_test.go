package rpc_test

import (
	"context"
	"fmt"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
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
