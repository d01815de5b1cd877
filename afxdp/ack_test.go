package afxdp_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/wire"
)

// TestLargeFrameAckedInStrides: the receiver of a large frame acknowledges
// its packets AckEvery at a time, not once per received batch.
func TestLargeFrameAckedInStrides(t *testing.T) {
	const ackEvery = 128
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	opts := afxdp.Options{Ticket: testTicket, Window: 1024, AckEvery: ackEvery}
	ea, eb, ca, cb := connected(t, la, lb, opts)
	rb := newCollector(1)
	go cb.Receive(rb)
	data := pattern(8<<20, 5)
	done := make(doneChan, 1)
	m := &wire.Message{
		Header:  wire.Header{Kind: wire.KindRequest, CallID: 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}},
		Done:    done,
	}
	before, beforeB := ea.Stats(), eb.Stats()
	if err := ca.Send(m); err != nil {
		t.Fatal(err)
	}
	rb.next(t, 10*time.Second).Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the frame was never acknowledged")
	}
	sent := ea.Stats().Sent - before.Sent
	acks := eb.Stats().Acks - beforeB.Acks
	if want := uint64(len(data) / la.MaxPayload()); sent < want {
		t.Fatalf("sender counted %d packets, want at least %d", sent, want)
	}
	// One per stride, one for the completed frame, and slack for strides
	// acknowledged by their timer when the sender paused mid-stride.
	if limit := sent/ackEvery*3/2 + 4; acks > limit || acks == 0 {
		t.Errorf("%d packets acknowledged by %d ACKs, want 1..%d", sent, acks, limit)
	}
}

// TestBusyReactorsServeCallers: busy-polling reactors (the *_ENABLE_POLLING
// variables) still let the goroutines they wake run. With every P running a
// reactor that never yielded, a woken caller waited for the scheduler's
// preemption, about 10ms a round trip instead of microseconds.
func TestBusyReactorsServeCallers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket, Busy: true})
	go cb.Receive(echoReceiver{cb})
	replies := newCollector(1)
	go ca.Receive(replies)
	const rounds = 200
	rtts := make([]time.Duration, 0, rounds)
	for i := range rounds {
		t0 := time.Now()
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i + 1)}, Meta: []byte("ping")}
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
		replies.next(t, 5*time.Second).Release()
		rtts = append(rtts, time.Since(t0))
	}
	slices.Sort(rtts)
	// Generous: the round trip takes microseconds; a caller left for the
	// preemption takes 10ms.
	if p50 := rtts[rounds/2]; p50 > 3*time.Millisecond {
		t.Fatalf("median round trip %v between busy reactors", p50)
	}
}
