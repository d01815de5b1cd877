package tcp_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

var echo = rpc.NewMethod("Echo")

// serveEcho serves an echo over tr on a loopback port and returns its
// address and the server.
func serveEcho(tr *tcp.Transport) (string, *rpc.Server) {
	srv := rpc.NewServer()
	srv.Register(echo, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(resp.Meta, req.Meta...) // a copy: req goes back to its pool
		return nil
	}, rpc.HandlerOptions{Inline: true})
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go srv.Serve(l)
	return l.Addr().String(), srv
}

// A Transport serves and dials; its zero value is usable. One Transport
// may serve and dial at once, sharing its reactors.
func ExampleTransport() {
	tr := &tcp.Transport{}
	addr, srv := serveEcho(tr)
	defer srv.Close()

	client := rpc.NewClient(addr, rpc.ClientOptions{Transport: tr})
	defer client.Close()
	var reply rpc.Reply
	if err := client.Call(context.Background(), echo, &rpc.Request{Meta: []byte("over tcp")}, &reply); err != nil {
		panic(err)
	}
	defer reply.Release()
	fmt.Printf("%s (%s)\n", reply.Meta, client.Stats().Path)
	// Output: over tcp (tcp)
}

// Mutual TLS 1.3 from files laid out as Kubernetes mounts a
// kubernetes.io/tls secret: each end presents its certificate and checks
// the peer's against the CA bundle, and the files are read again when they
// change. (testdata/tls holds a certificate for 127.0.0.1 made for this
// example only; the README shows how to make a cluster's.) A client
// without the certificates is answered with why it was refused.
func ExampleTLSFiles() {
	files := &tcp.TLSFiles{CertFile: "testdata/tls/tls.crt", KeyFile: "testdata/tls/tls.key", CAFile: "testdata/tls/ca.crt",
		Hint: "--certs"}
	cfg, err := files.Config()
	if err != nil {
		panic(err)
	}
	addr, srv := serveEcho(&tcp.Transport{TLS: cfg, PlaintextHint: files.Hint})
	defer srv.Close()

	client := rpc.NewClient(addr, rpc.ClientOptions{Transport: &tcp.Transport{TLS: cfg}})
	defer client.Close()
	var reply rpc.Reply
	if err := client.Call(context.Background(), echo, &rpc.Request{Meta: []byte("over mutual TLS")}, &reply); err != nil {
		panic(err)
	}
	defer reply.Release()
	fmt.Printf("%s\n", reply.Meta)

	plain := rpc.NewClient(addr, rpc.ClientOptions{Transport: &tcp.Transport{}, FailFast: true})
	defer plain.Close()
	err = plain.Call(context.Background(), echo, &rpc.Request{Meta: []byte("in the clear")}, &rpc.Reply{})
	fmt.Println(rpc.CodeOf(err), strings.HasSuffix(err.Error(), "(--certs)"))
	// Output:
	// over mutual TLS
	// unauthenticated true
}
