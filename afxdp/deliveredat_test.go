package afxdp_test

import (
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/monoclock"
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
