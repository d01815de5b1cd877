package afxdp_test

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/monoclock"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// stampReceiver records, in its Deliver, the Conn's DeliveredAt.
type stampReceiver struct {
	c  *afxdp.Conn
	at chan int64
}

func (r *stampReceiver) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (r *stampReceiver) Deliver(in *wire.Inbound) {
	r.at <- r.c.DeliveredAt()
	in.Release()
}

// TestDeliveredAt: a frame the reactor delivers carries the clock of the
// reactor's turn, read between the Send and the Deliver; one delivered on
// Receive's goroutine (BlockingReceiver) carries none.
func TestDeliveredAt(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket, BlockingReceiver: blocking})
		r := &stampReceiver{c: cb, at: make(chan int64, 1)}
		go cb.Receive(r)
		for i := range 3 {
			before := monoclock.Nanos()
			if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i + 1)}, Meta: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			var at int64
			select {
			case at = <-r.at:
			case <-time.After(5 * time.Second):
				t.Fatal("frame never delivered")
			}
			after := monoclock.Nanos()
			switch {
			case blocking && at != 0:
				t.Fatalf("blocking receiver: DeliveredAt %d, want 0", at)
			case !blocking && (at < before || at > after):
				t.Fatalf("DeliveredAt %d outside the send and the delivery, %d..%d", at, before, after)
			}
		}
	}
}

// TestServerDeadlineFromDelivery: a call's deadline on an afxdp server
// counts from when its request was delivered, within the client's call,
// for an inline handler and one on a goroutine.
func TestServerDeadlineFromDelivery(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
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
