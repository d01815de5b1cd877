package afxdp_test

import (
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/netns/netnstest"
	"github.com/starwire/starwire/wire"
)

// TestSteadyStateAllocs checks that a frame with a tensor, sent over a
// session and received into a pooled buffer, costs no allocation once the
// session is warm: send, segmentation, acknowledgement, reassembly and
// delivery all reuse their storage.
func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	steadyStateAllocs(t, la, lb)
}

// TestSteadyStateAllocsXSK is TestSteadyStateAllocs over AF_XDP sockets on
// a veth pair.
func TestSteadyStateAllocsXSK(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	p := netnstest.NewForTest(t, netns.Options{})
	steadyStateAllocs(t, openXSK(t, p.A, link.XSKOptions{}), openXSK(t, p.B, link.XSKOptions{}))
}

func steadyStateAllocs(t *testing.T, la, lb link.Link) {
	_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	rb := newCollector(4)
	go cb.Receive(rb)
	data := pattern(8192, 4)
	done := make(doneChan, 1)
	m := &wire.Message{Done: done}
	shape := []int64{8192}
	tensors := []wire.Tensor{{DType: wire.DTUint8, Shape: shape, Data: data}}
	meta := []byte("meta")
	// One watchdog for the whole test: a timer per wait would allocate.
	stop := make(chan struct{})
	watchdog := time.AfterFunc(30*time.Second, func() { close(stop) })
	defer watchdog.Stop()
	one := func() {
		*m = wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: meta, Tensors: tensors, Done: done}
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
		select {
		case in := <-rb.frames:
			in.Release()
		case <-stop:
			t.Fatal("no frame")
		}
		select {
		case <-done:
		case <-stop:
			t.Fatal("not completed")
		}
	}
	for range 100 {
		one() // warm every pool and ring
	}
	if n := testing.AllocsPerRun(500, one); n >= 1 {
		t.Fatalf("%v allocations per frame", n)
	}
}
