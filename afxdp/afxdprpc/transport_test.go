package afxdprpc_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

func TestTransport(t *testing.T) {
	a, b := netip.MustParseAddrPort("198.18.1.1:1"), netip.MustParseAddrPort("198.18.1.2:1")
	la, lb := link.MemPair(a, b, link.MemOptions{})
	srvEP, cliEP := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket}), afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket, Backlog: -1})
	defer srvEP.Close()
	defer cliEP.Close()
	tr := afxdprpc.Transport(srvEP)
	if tr.Name() != "afxdp" {
		t.Fatalf("name %q", tr.Name())
	}
	if _, err := tr.Listen("198.18.1.9:5"); err == nil {
		t.Fatal("listening on an address the endpoint is not bound to")
	}
	l, err := tr.Listen(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if l.Addr().String() != b.String() {
		t.Fatalf("listener on %v", l.Addr())
	}
	m := rpc.NewMethod("afxdprpc.test.Hello")
	s := rpc.NewServer()
	s.Register(m, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		resp.Meta = append(append(resp.Meta, "hello "...), req.Meta...)
		return nil
	}, rpc.HandlerOptions{Inline: true})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := rpc.NewClient(b.String(), rpc.ClientOptions{Transport: afxdprpc.Transport(cliEP)})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var r rpc.Reply
	if err := c.Call(ctx, m, &rpc.Request{Meta: []byte("there")}, &r); err != nil {
		t.Fatal(err)
	}
	if string(r.Meta) != "hello there" {
		t.Fatalf("answer %q", r.Meta)
	}
	r.Release()
	// Shutting the server down closes the listener, which must end Accept.
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-served:
		if !errors.Is(err, rpc.ErrServerClosed) {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	l2, _ := tr.Listen("")
	l2.Close()
	if _, err := l2.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
}
