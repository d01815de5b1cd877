package afxdp_test

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/bufpool"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// callDone is a wire.Completion that records which messages completed.
type callDone struct {
	done chan uint64 // CallIDs, in the order they completed
	errs atomic.Int32
}

func (d *callDone) Sent(m *wire.Message, err error) {
	if err != nil {
		d.errs.Add(1)
	}
	d.done <- m.Header.CallID
}

// blocker receives frames on the reactor, and holds the reactor in the
// Deliver of the frame with CallID hold until release is closed.
type blocker struct {
	hold    uint64
	entered chan struct{}
	release chan struct{}
}

func (b *blocker) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (b *blocker) Deliver(in *wire.Inbound) {
	if in.Header.CallID == b.hold {
		close(b.entered)
		<-b.release
	}
	in.Release()
}

func tensorMsg(id uint64, data []byte, done wire.Completion) *wire.Message {
	return &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: id}, Done: done,
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}}
}

// TestWithdraw takes messages back at each stage on a lossy, reordering
// link. The receiving session may hold 4 MiB and nothing reads it until the
// end, so of 3 MiB frames A and B, B stops at its first packet, its window
// shut. Then: A, acknowledged, is Completing; B, partly sent, is Withdrawn
// and arrives whole with its original bytes although the caller overwrote
// them; C behind it is Unsent and never arrives, and D behind C arrives
// renumbered; E, sent while the sender's reactor is held in a Deliver, is
// Unsent from the Send queue at once. Only A's and D's Done are called, and
// every pooled buffer (the copy of B) is back after Close.
func TestWithdraw(t *testing.T) {
	const mib = 1 << 20
	live := bufpool.Live()
	la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.02, Reorder: 0.05, Seed: 9})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, SessionMemory: 4 * mib, EndpointMemory: 4 * mib})
	closed := false
	closeAll := func() {
		if !closed {
			closed = true
			ea.Close()
			eb.Close()
		}
	}
	t.Cleanup(closeAll)
	ca, cb := session(t, ea, eb)
	blk := &blocker{hold: 99, entered: make(chan struct{}), release: make(chan struct{})}
	go ca.Receive(blk)

	done := &callDone{done: make(chan uint64, 8)}
	orig := map[uint64][]byte{1: pattern(3*mib, 1), 2: pattern(3*mib, 2), 3: pattern(mib, 3), 4: pattern(64<<10, 4), 5: pattern(1000, 5)}
	msgs := map[uint64]*wire.Message{}
	for id := uint64(1); id <= 4; id++ {
		msgs[id] = tensorMsg(id, bytes.Clone(orig[id]), done)
		if err := ca.Send(msgs[id]); err != nil {
			t.Fatal(err)
		}
	}
	if id := waitDone(t, done); id != 1 {
		t.Fatalf("message %d completed first, want 1", id)
	}
	if got := ca.Withdraw(msgs[1]); got != wire.Completing {
		t.Fatalf("withdraw of an acknowledged message: %v, want Completing", got)
	}
	testwait.For(t, settle, eb.Stats, func(s afxdp.Stats) bool { return s.Deferred > 0 }, "B's first packet deferred")
	if got := timedWithdraw(t, ca, msgs[2]); got != wire.Withdrawn {
		t.Fatalf("withdraw of a partly sent message: %v, want Withdrawn", got)
	}
	if got := timedWithdraw(t, ca, msgs[3]); got != wire.Unsent {
		t.Fatalf("withdraw of a message behind a shut window: %v, want Unsent", got)
	}
	for _, id := range []uint64{2, 3} {
		fill(msgs[id].Tensors[0].Data, 0xff) // the caller's memory is its own again
	}

	// Hold the sender's reactor: E stays in the Send queue.
	if err := cb.Send(tensorMsg(99, []byte("hold"), nil)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-blk.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the sender's reactor never delivered the frame that holds it")
	}
	msgs[5] = tensorMsg(5, bytes.Clone(orig[5]), done)
	if err := ca.Send(msgs[5]); err != nil {
		t.Fatal(err)
	}
	if got := timedWithdraw(t, ca, msgs[5]); got != wire.Unsent {
		t.Fatalf("withdraw of a queued message: %v, want Unsent", got)
	}
	close(blk.release)

	rb := newCollector(8)
	go cb.Receive(rb)
	for _, want := range []uint64{1, 2, 4} {
		in := nextOrState(t, rb, 20*time.Second, ca, cb, ea, eb)
		if in.Err != nil || in.Header.CallID != want || !bytes.Equal(in.Tensors[0].Data, orig[want]) {
			t.Fatalf("frame %d (want %d): %v, or its tensor differs from what was sent", in.Header.CallID, want, in.Err)
		}
		in.Release()
	}
	if id := waitDone(t, done); id != 4 {
		t.Fatalf("message %d completed, want 4", id)
	}
	closeAll()
	select {
	case id := <-done.done:
		t.Fatalf("message %d completed after it was withdrawn", id)
	case in := <-rb.frames:
		t.Fatalf("frame %d arrived after it was withdrawn", in.Header.CallID)
	default:
	}
	if n := done.errs.Load(); n != 0 {
		t.Fatalf("%d messages completed with an error", n)
	}
	if n := bufpool.Live() - live; n != 0 {
		t.Fatalf("%d pooled buffers not returned after close", n)
	}
	t.Logf("sender %+v", ea.Stats())
}

// TestWithdrawOnClose: a Withdraw of a message the session still holds
// when it ends is Completing (its Done was called with the error), and the
// copy of one withdrawn before is released.
func TestWithdrawOnClose(t *testing.T) {
	const mib = 1 << 20
	live := bufpool.Live()
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, SessionMemory: 4 * mib, EndpointMemory: 4 * mib})
	ca, cb := session(t, ea, eb)
	done := &callDone{done: make(chan uint64, 8)}
	a, b, c := tensorMsg(1, pattern(3*mib, 1), done), tensorMsg(2, pattern(3*mib, 2), done), tensorMsg(3, pattern(mib, 3), done)
	for _, m := range []*wire.Message{a, b, c} {
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	waitDone(t, done)
	testwait.For(t, settle, eb.Stats, func(s afxdp.Stats) bool { return s.Deferred > 0 }, "B's first packet deferred")
	if got := timedWithdraw(t, ca, b); got != wire.Withdrawn {
		t.Fatalf("withdraw of a partly sent message: %v, want Withdrawn", got)
	}
	ea.Close()
	if id := waitDone(t, done); id != 3 || done.errs.Load() != 1 {
		t.Fatalf("message %d completed (%d errors), want 3 with the session's error", id, done.errs.Load())
	}
	if got := ca.Withdraw(c); got != wire.Completing {
		t.Fatalf("withdraw after the session ended: %v, want Completing", got)
	}
	eb.Close()
	cb.Receive(&blocker{hold: ^uint64(0)}) // releases the frame held for it
	if n := bufpool.Live() - live; n != 0 {
		t.Fatalf("%d pooled buffers not returned after close", n)
	}
}

// nextOrState is c.next that also fails when the session ends, at once,
// with its error. A failure reports what the sender and the receiver held
// an eighth of the wait in, when a frame is long overdue but the sessions
// have not yet timed out, and at the end.
func nextOrState(t *testing.T, c *collector, within time.Duration, ca, cb *afxdp.Conn, ea, eb *afxdp.Endpoint) *wire.Inbound {
	t.Helper()
	state := func() string { return fmt.Sprintf("sender %s\nreceiver %s", ea.State(), eb.State()) }
	start, early := time.Now(), "not taken"
	look := time.NewTimer(within / 8)
	defer look.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		var why string
		select {
		case in := <-c.frames:
			return in
		case <-look.C:
			early = state()
			continue
		case <-ca.Done():
			why = fmt.Sprintf("the sender's session ended: %v", ca.Err())
		case <-cb.Done():
			why = fmt.Sprintf("the receiver's session ended: %v", cb.Err())
		case <-deadline.C:
			why = "no frame"
		}
		t.Fatalf("%s after %v\nafter %v: %s\nat the end: %s", why, time.Since(start), within/8, early, state())
	}
}

// timedWithdraw withdraws m and fails the test if the answer took more
// than a second: it is meant to come within milliseconds.
func timedWithdraw(t *testing.T, c *afxdp.Conn, m *wire.Message) wire.Withdrawal {
	t.Helper()
	start := time.Now()
	got := c.Withdraw(m)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Withdraw took %v", d)
	}
	return got
}

func waitDone(t *testing.T, d *callDone) uint64 {
	t.Helper()
	select {
	case id := <-d.done:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("no message completed within 20s")
		return 0
	}
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}
