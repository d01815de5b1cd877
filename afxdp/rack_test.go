package afxdp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/wire"
)

// sendBulk sends, from ca to cb, 500 small frames and a tensor of size
// bytes, and checks they all arrive intact and in order and complete.
func sendBulk(t *testing.T, ca, cb *afxdp.Conn, size int) {
	t.Helper()
	const small = 500
	rb := newCollector(small + 1)
	go cb.Receive(rb)
	done := make(doneChan, small+1)
	for i := range small {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i + 1)}, Meta: []byte{byte(i)}, Done: done}
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	big := pattern(size, 7)
	if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: small + 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: big}}, Done: done}); err != nil {
		t.Fatal(err)
	}
	for i := range small + 1 {
		in := rb.next(t, 30*time.Second)
		if in.Err != nil || in.Header.CallID != uint64(i+1) {
			t.Fatalf("frame %d: call %d, %v", i, in.Header.CallID, in.Err)
		}
		if i == small && !bytes.Equal(in.Tensors[0].Data, big) {
			t.Fatal("tensor differs")
		}
		in.Release()
	}
	for range small + 1 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a message never completed")
		}
	}
}

// TestLosslessLinkResendsNothing: over a link that loses, reorders and
// duplicates nothing, no packet is ever found lost. The only resends
// allowed are the timers' probes, each after a silence of the peer longer
// than the probe timeout (two round trips, at least Options.RTO), which a
// loaded machine can cause: at most one per RTO of the transfer; going
// back a window on a timeout resent hundreds of packets each time.
func TestLosslessLinkResendsNothing(t *testing.T) {
	const rto = 4 * time.Millisecond
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket, RTO: rto})
	start := time.Now()
	sendBulk(t, ca, cb, 16<<20)
	took := time.Since(start)
	st := ea.Stats()
	t.Logf("sent %d in %v, resent %d (probes %d, spurious %d)", st.Sent, took, st.Resent, st.Probes, st.Spurious)
	if st.Resent != st.Probes {
		t.Fatalf("%d packets found lost on a lossless link", st.Resent-st.Probes)
	}
	if limit := uint64(took/rto) + 1; st.Probes > limit {
		t.Fatalf("%d probes in %v, at most %d", st.Probes, took, limit)
	}
}

// TestLossResendsWhatWasLost: with 5% of the packets lost each way, every
// lost data packet is resent, and little else.
func TestLossResendsWhatWasLost(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.05, Seed: 3})
	ea, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	sendBulk(t, ca, cb, 16<<20)
	st, lost := ea.Stats(), la.Dropped.Load()
	t.Logf("sent %d, lost %d, resent %d (probes %d, spurious %d)", st.Sent, lost, st.Resent, st.Probes, st.Spurious)
	// lost counts this end's packets: data, and a few ACKs and the OPEN.
	if st.Resent+10 < lost || st.Resent > lost+lost/4+10 {
		t.Fatalf("%d packets lost, %d resent", lost, st.Resent)
	}
}

// TestReorderingResendsAlmostNothing: a quarter of the packets overtaken
// by later ones, none lost: loss detection by time waits for them, the
// reordering window set by how late they came.
func TestReorderingResendsAlmostNothing(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{Reorder: 0.25, Seed: 4})
	ea, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	sendBulk(t, ca, cb, 16<<20)
	st := ea.Stats()
	t.Logf("sent %d, reordered %d, resent %d (probes %d, spurious %d)", st.Sent, la.Reordered.Load(), st.Resent, st.Probes, st.Spurious)
	if st.Resent*50 > st.Sent {
		t.Fatalf("%d of %d packets resent without any loss", st.Resent, st.Sent)
	}
}
