package afxdprpc_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// Dual starts every connection on TCP and moves its calls to a packet
// session when both ends advertise one in their hello. Here the packet
// endpoints run over an in-memory link, standing in for the AF_XDP sockets
// afxdp.Open gives a deployment; both hold the same ticket, which lets
// one open sessions with the other.
func ExampleDual() {
	ticket := afxdp.NewTicket()
	la, lb := link.MemPair(netip.MustParseAddrPort("198.18.0.1:7470"), netip.MustParseAddrPort("198.18.0.2:7470"), link.MemOptions{})
	cliEP := afxdp.NewEndpoint(la, afxdp.Options{Ticket: &ticket})
	srvEP := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: &ticket})
	defer cliEP.Close()
	defer srvEP.Close()
	// Every call over the packet path once it is open (PathAFXDP); the
	// default measures both paths and picks per size.
	opts := afxdprpc.DualOptions{Path: netpath.AFXDP, Policy: afxdprpc.PathPolicy{Mode: afxdprpc.PathAFXDP},
		Logger: slog.New(slog.DiscardHandler)}

	echo := rpc.NewMethod("Echo")
	srv := rpc.NewServer()
	srv.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := afxdprpc.Dual(&tcp.Transport{}, srvEP, opts).Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	defer srv.Close()

	// The path each call took, as the transport that carried it reports.
	var path netpath.Path
	record := func(ctx context.Context, info *rpc.ClientInfo, req *rpc.Request, reply *rpc.Reply, invoke rpc.Invoker) error {
		err := invoke(ctx, info, req, reply)
		path = info.Path
		return err
	}
	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Dual(&tcp.Transport{}, cliEP, opts),
		Interceptors: []rpc.ClientInterceptor{record}})
	defer client.Close()
	// The first calls go over TCP while the session opens: call until one
	// takes the packet path, within a bound.
	for i := 0; i < 10000 && path != netpath.AFXDP; i++ {
		var reply rpc.Reply
		if err := client.Call(context.Background(), echo, &rpc.Request{Meta: []byte("hello")}, &reply); err != nil {
			panic(err)
		}
		reply.Release()
	}
	fmt.Println("calls take", path)
	// Output: calls take afxdp
}
