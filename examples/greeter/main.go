// Command greeter serves the example Greeter service over starwire and
// calls it through the generated stubs, with a client interceptor that
// logs each call. Everything starwire-specific is in this file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/starwire/starwire/examples/greeter/greeterpb"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "greeter:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	srv := rpc.NewServer()
	greeterpb.RegisterGreeterStarwireServer(srv, greeter{}, nil)
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	go srv.Serve(l)
	defer srv.Close()

	logCalls := func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
		err := invoke(ctx, info, req, reply)
		fmt.Fprintf(out, "call %s over %s: %v\n", info.Method, info.Path, rpc.CodeOf(err))
		return err
	}
	c := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}, Interceptors: []rpc.ClientInterceptor{logCalls}})
	defer c.Close()
	resp, err := greeterpb.NewGreeterStarwireClient(c).SayHello(context.Background(), &greeterpb.HelloRequest{Name: "starwire"})
	if err != nil {
		return err
	}
	fmt.Fprintln(out, resp.GetMessage())
	return nil
}
