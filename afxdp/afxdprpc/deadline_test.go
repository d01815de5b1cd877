package afxdprpc_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestServerDeadlineFromDelivery: a call's deadline on an afxdp server
// counts from when its request was delivered, within the client's call,
// for an inline handler and one on a goroutine.
func TestServerDeadlineFromDelivery(t *testing.T) {
	la, lb := link.MemPair(netip.MustParseAddrPort("198.18.0.1:7000"), netip.MustParseAddrPort("198.18.0.2:7000"), link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { ea.Close(); eb.Close() })
	deadlines := make(chan time.Time, 1)
	record := func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		d, _ := ctx.Deadline()
		deadlines <- d
		return nil
	}
	s := rpc.NewServer()
	inline, queued := rpc.NewMethod("afxdp.test.DeadlineInline"), rpc.NewMethod("afxdp.test.DeadlineQueued")
	s.Register(inline, record, rpc.HandlerOptions{Inline: true})
	s.Register(queued, record, rpc.HandlerOptions{})
	l, err := afxdprpc.Transport(eb).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	t.Cleanup(func() { s.Close() })
	c := rpc.NewClient(eb.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(ea)})
	t.Cleanup(func() { c.Close() })
	const timeout = time.Minute
	for _, m := range []rpc.Method{inline, queued, inline} {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		// The request carries what is left of the caller's deadline, so
		// the server's deadline is the caller's moved on by the time
		// from the client's clock read to the delivery: never earlier,
		// and never later than the call took.
		want, _ := ctx.Deadline()
		before := time.Now()
		var reply rpc.Reply
		err := c.Call(ctx, m, &rpc.Request{Meta: []byte("x")}, &reply)
		after := time.Now()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		reply.Release()
		d := <-deadlines
		if d.Before(want) || d.After(want.Add(after.Sub(before))) {
			t.Fatalf("deadline %v is not the caller's %v moved on by at most the call's %v", d, want, after.Sub(before))
		}
	}
}
