package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A Metrics counts a Server's and a Client's calls through their
// interceptors and serves them to Prometheus. (Here the two ends share one,
// in one process; a task exports its own.)
func Example() {
	m := metrics.New()
	echo, fail := rpc.NewMethod("Echo"), rpc.NewMethod("Fail")
	srv := rpc.NewServer()
	srv.Interceptors = []rpc.ServerInterceptor{m.ServerInterceptor()}
	srv.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	srv.Register(fail, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		return status.Errorf(wire.NotFound, "no such thing")
	}, rpc.HandlerOptions{Inline: true})
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{},
		Interceptors: []rpc.ClientInterceptor{m.ClientInterceptor()}})
	defer client.Close()
	for range 3 {
		var reply rpc.Reply
		if err := client.Call(context.Background(), echo, &rpc.Request{Meta: []byte("hi")}, &reply); err != nil {
			panic(err)
		}
		reply.Release()
	}
	client.Call(context.Background(), fail, &rpc.Request{}, &rpc.Reply{})

	s, err := m.Serve("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	resp, err := http.Get(s.URL())
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "starwire_client_calls_total") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// starwire_client_calls_total{code="NotFound",method="Fail",path="tcp"} 1
	// starwire_client_calls_total{code="OK",method="Echo",path="tcp"} 3
}
