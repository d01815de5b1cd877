package afxdp_test

import (
	"bytes"
	"testing"
	"testing/synctest"
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

// fakeTime runs f in a testing/synctest bubble, on a fake clock that
// moves only when every goroutine of the test waits: the packets of a
// MemLink then take no time, and every resend is the protocol's doing,
// not the machine's. Its endpoints must not spin (Spin, FrameSpin
// negative): the clock stands still while a reactor polls.
func fakeTime(t *testing.T, f func(t *testing.T)) { synctest.Test(t, f) }

// fakeOptions are Options for endpoints on fake time: a reactor that
// polls for a time would poll forever on a clock that moves only when it
// stops.
func fakeOptions(o afxdp.Options) afxdp.Options {
	o.Ticket, o.Spin, o.FrameSpin = testTicket, -1, -1
	return o
}

// TestLosslessLinkResendsNothing: over a link that loses, reorders and
// duplicates nothing, on fake time, where no reactor is ever late, no
// packet is resent: neither found lost nor probed for. (Going back a
// window on a timeout once resent hundreds of packets each time.)
func TestLosslessLinkResendsNothing(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		ea, _, ca, cb := connected(t, la, lb, fakeOptions(afxdp.Options{RTO: 4 * time.Millisecond}))
		start := time.Now()
		sendBulk(t, ca, cb, 16<<20)
		st := ea.Stats()
		t.Logf("sent %d in %v of fake time, resent %d (probes %d, spurious %d)", st.Sent, time.Since(start), st.Resent, st.Probes, st.Spurious)
		if st.Resent != 0 || st.Probes != 0 {
			t.Fatalf("%d packets resent, %d probes, on a lossless link", st.Resent, st.Probes)
		}
	})
}

// TestLossResendsWhatWasLost: with 5% of the packets lost each way, every
// lost data packet is resent once, and nothing else but the timers'
// probes: on fake time, where no packet or acknowledgement is late, loss
// detection resending a packet the peer has is a bug. A probe may: the
// last packet's acknowledgement lost, the probe resends a packet the peer
// holds (and reports received twice). (Taking the packet number as RACK's tie-break between
// packets sent in the same clock tick found resent packets lost again as
// soon as they went: 1,890 resent for 684 lost, 171 reported spurious.)
func TestLossResendsWhatWasLost(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.05, Seed: 3})
		ea, _, ca, cb := connected(t, la, lb, fakeOptions(afxdp.Options{}))
		sendBulk(t, ca, cb, 16<<20)
		st, lost := ea.Stats(), la.Dropped.Load()
		t.Logf("sent %d, lost %d, resent %d (probes %d, spurious %d)", st.Sent, lost, st.Resent, st.Probes, st.Spurious)
		// lost counts this end's packets: data, and a few ACKs and the
		// OPEN, which are not resent as such.
		if st.Spurious > st.Probes || st.Resent > lost+st.Probes || st.Resent+10 < lost {
			t.Fatalf("%d packets lost, %d resent (%d probes), %d of them reported received twice", lost, st.Resent, st.Probes, st.Spurious)
		}
	})
}

// TestReorderingResendsAlmostNothing: a quarter of the packets overtaken
// by later ones, none lost: loss detection by time waits for them, the
// reordering window set by how late they came. This one runs in real
// time: on fake time a packet held back is late by no time at all.
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
