package afxdp_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

var (
	memA = netip.MustParseAddrPort("198.18.0.1:7000")
	memB = netip.MustParseAddrPort("198.18.0.2:7000")
)

// collector is a wire.Receiver that hands every frame to a channel.
type collector struct {
	frames chan *wire.Inbound
}

func newCollector(n int) *collector { return &collector{frames: make(chan *wire.Inbound, n)} }

func (c *collector) Alloc(in *wire.Inbound) error { in.AllocPooled(); return nil }
func (c *collector) Deliver(in *wire.Inbound)     { c.frames <- in }

func (c *collector) next(t testing.TB, within time.Duration) *wire.Inbound {
	t.Helper()
	select {
	case in := <-c.frames:
		return in
	case <-time.After(within):
		t.Fatalf("no frame within %v", within)
		return nil
	}
}

// doneChan is a wire.Completion reporting on a channel.
type doneChan chan error

func (d doneChan) Sent(m *wire.Message, err error) { d <- err }

// connected returns a dialed and an accepted Conn over a pair of endpoints.
func connected(t testing.TB, a, b link.Link, opts afxdp.Options) (ea, eb *afxdp.Endpoint, ca, cb *afxdp.Conn) {
	t.Helper()
	ea, eb = afxdp.NewEndpoint(a, opts), afxdp.NewEndpoint(b, opts)
	t.Cleanup(func() { ea.Close(); eb.Close() })
	ca, cb = session(t, ea, eb)
	return ea, eb, ca, cb
}

// session dials eb from ea and returns both ends of the session.
func session(t testing.TB, ea, eb *afxdp.Endpoint) (ca, cb *afxdp.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if ca, err = ea.Dial(ctx, eb.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if cb, err = eb.Accept(); err != nil {
		t.Fatal(err)
	}
	return ca, cb
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	// The pattern repeats every patternPeriod bytes: the rest is copied,
	// which the race detector checks per copy, not per byte (a 128 MiB
	// pattern took seconds of a -race run byte by byte).
	head := b[:min(n, patternPeriod)]
	for i := range head {
		head[i] = byte(i*7) ^ seed ^ byte(i>>11)
	}
	for done := len(head); done < n; {
		done += copy(b[done:], b[:done])
	}
	return b
}

// patternPeriod is where byte(i*7) and byte(i>>11) both start again.
const patternPeriod = 256 << 11

func TestMemLinkFrames(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	rb := newCollector(16)
	go cb.Receive(rb)
	data := pattern(100_000, 3)
	done := make(doneChan, 1)
	m := &wire.Message{
		Header:  wire.Header{Kind: wire.KindRequest, Method: 9, CallID: 42},
		Meta:    []byte("metadata"),
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}},
		Done:    done,
	}
	if err := ca.Send(m); err != nil {
		t.Fatal(err)
	}
	in := rb.next(t, 5*time.Second)
	defer in.Release()
	if in.Err != nil || in.Header.CallID != 42 || string(in.Meta) != "metadata" || len(in.Tensors) != 1 {
		t.Fatalf("got %+v meta %q err %v", in.Header, in.Meta, in.Err)
	}
	if !bytes.Equal(in.Tensors[0].Data, data) {
		t.Fatal("tensor bytes differ")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("message never completed")
	}
}

// TestMemLinkImpaired sends 1000 frames and a 64 MiB tensor through a link
// that loses 5%, reorders 25% and duplicates 1% of the packets, and checks
// every frame arrives once, in order, byte-exact. On fake time, where a
// packet held back is late by no time at all, so that RACK takes every
// reordered packet for lost: the receiver sees thousands of duplicates
// besides the link's, and must drop them all.
func TestMemLinkImpaired(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		size := 64 << 20
		if testing.Short() || raceEnabled { // see raceEnabled
			size = 4 << 20
		}
		la, lb := link.MemPair(memA, memB, link.MemOptions{Loss: 0.05, Reorder: 0.25, Duplicate: 0.01, Seed: 1})
		ea, eb, ca, cb := connected(t, la, lb, fakeOptions(afxdp.Options{RTO: 2 * time.Millisecond}))
		rb := newCollector(2048)
		go cb.Receive(rb)

		const frames = 1000
		done := make(doneChan, frames+1)
		for i := range frames {
			meta := binary.LittleEndian.AppendUint64(nil, uint64(i))
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i + 1)}, Meta: meta, Done: done}
			if err := ca.Send(m); err != nil {
				t.Fatal(err)
			}
		}
		big := pattern(size, 5)
		m := &wire.Message{
			Header:  wire.Header{Kind: wire.KindRequest, CallID: frames + 1},
			Tensors: []wire.Tensor{{DType: wire.DTFloat, Shape: []int64{int64(size / 4)}, Data: big}},
			Done:    done,
		}
		if err := ca.Send(m); err != nil {
			t.Fatal(err)
		}
		for i := range frames + 1 {
			in := rb.next(t, 60*time.Second)
			if in.Err != nil || in.Header.CallID != uint64(i+1) {
				t.Fatalf("frame %d: call %d err %v", i, in.Header.CallID, in.Err)
			}
			if i < frames && binary.LittleEndian.Uint64(in.Meta) != uint64(i) {
				t.Fatalf("frame %d carries %d", i, binary.LittleEndian.Uint64(in.Meta))
			}
			if i == frames && !bytes.Equal(in.Tensors[0].Data, big) {
				t.Fatal("64 MiB tensor differs")
			}
			in.Release()
		}
		for range frames + 1 {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a message never completed")
			}
		}
		synctest.Wait() // every goroutine idle: nothing more is on its way
		select {
		case in := <-rb.frames:
			t.Fatalf("extra frame, call %d", in.Header.CallID)
		default:
		}
		st := ea.Stats()
		t.Logf("dropped %d reordered %d duplicated %d, resent %d (probes %d, spurious %d)", la.Dropped.Load(), la.Reordered.Load(), la.Duplicated.Load(), st.Resent, st.Probes, st.Spurious)
		t.Logf("peer dups %d", eb.Stats().Duplicates)
		if la.Dropped.Load() == 0 || la.Reordered.Load() == 0 || la.Duplicated.Load() == 0 {
			t.Fatal("the link impaired nothing")
		}
	})
}

func TestDialRefused(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	ea := afxdp.NewEndpoint(la, afxdp.Options{Ticket: testTicket})
	eb := afxdp.NewEndpoint(lb, afxdp.Options{Ticket: testTicket, Backlog: -1})
	defer ea.Close()
	defer eb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := ea.Dial(ctx, memB.String()); !errors.Is(err, afxdp.ErrReset) {
		t.Fatalf("dial to a refusing endpoint: %v", err)
	}
}

// TestPeerGoneCompletesWithError: a message to a peer that vanished
// completes with ErrPeerUnreachable once DeadAfter has passed without an
// answer: on fake time, neither before nor more than the longest
// retransmission timeout after.
func TestPeerGoneCompletesWithError(t *testing.T) {
	fakeTime(t, func(t *testing.T) {
		opts := fakeOptions(afxdp.Options{DeadAfter: 300 * time.Millisecond, MaxRTO: 100 * time.Millisecond})
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		_, eb, ca, cb := connected(t, la, lb, opts)
		go cb.Receive(newCollector(16))
		// The peer vanishes without a word: its link drops everything.
		lb.Close()
		t.Cleanup(func() { eb.Close() })
		done := make(doneChan, 1)
		start := time.Now()
		data := pattern(1<<20, 1)
		ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1},
			Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{1 << 20}, Data: data}}, Done: done})
		err := testwait.Recv(t, time.Minute, done, "the message to complete")
		if !errors.Is(err, afxdp.ErrPeerUnreachable) {
			t.Fatalf("completed with %v", err)
		}
		if d := time.Since(start); d < opts.DeadAfter || d > opts.DeadAfter+opts.MaxRTO {
			t.Fatalf("completed after %v of fake time; DeadAfter %v, MaxRTO %v", d, opts.DeadAfter, opts.MaxRTO)
		} else {
			t.Logf("completed after %v of fake time", d)
		}
		ca.Receive(newCollector(1)) // returns, since the session ended
	})
}

func TestCloseEndsPeerReceive(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	errc := make(chan error, 1)
	go func() { errc <- cb.Receive(newCollector(1)) }()
	ca.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, afxdp.ErrPeerClosed) {
			t.Fatalf("Receive returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Receive did not return after the peer closed")
	}
	if err := ca.Send(&wire.Message{}); !errors.Is(err, afxdp.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
}

// failOnce is a Link whose next Flush, once armed, reports an error.
type failOnce struct {
	link.Link
	armed atomic.Bool
}

func (f *failOnce) Flush() error {
	err := f.Link.Flush()
	if f.armed.CompareAndSwap(true, false) {
		return errors.New("injected flush failure")
	}
	return err
}

// TestSendErrorOnSenderFlush checks that a failed flush is counted when the
// sending goroutine, finding the reactor parked, transmits itself.
func TestSendErrorOnSenderFlush(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	fa := &failOnce{Link: la}
	// An RTO far longer than the wait below: the reactor, parked with
	// nothing to do for an RTO, cannot be the one that counts the error,
	// however late this machine runs the sender.
	const rto = time.Minute
	ea, _, ca, _ := connected(t, fa, lb, afxdp.Options{Ticket: testTicket, RTO: rto})
	testwait.Eventually(t, 10*time.Second, ea.Parked, "the reactor to park")
	fa.armed.Store(true)
	if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Done: make(doneChan, 1)}); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, rto/2, func() bool { return ea.Stats().SendErrors > 0 }, "the failed flush to be counted")
}

// TestMemLinkManyTensors sends a frame whose tensors, an empty one among
// them, start and end inside packets and straddle packet boundaries, with
// loss and reordering, and checks every tensor lands whole.
func TestMemLinkManyTensors(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{MaxPayload: 512, Loss: 0.05, Reorder: 0.2, Seed: 7})
	_, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket})
	rb := newCollector(4)
	go cb.Receive(rb)
	sizes := []int{1, 0, 471, 472, 473, 3000, 5, 0, 1 << 16, 2}
	ts := make([]wire.Tensor, len(sizes))
	for i, n := range sizes {
		ts[i] = wire.Tensor{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: pattern(n, byte(i))}
	}
	done := make(doneChan, 1)
	if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 7}, Tensors: ts, Done: done}); err != nil {
		t.Fatal(err)
	}
	in := rb.next(t, 10*time.Second)
	defer in.Release()
	if in.Err != nil || len(in.Tensors) != len(sizes) {
		t.Fatalf("got %d tensors, err %v", len(in.Tensors), in.Err)
	}
	for i := range sizes {
		if !bytes.Equal(in.Tensors[i].Data, ts[i].Data) {
			t.Fatalf("tensor %d (%d bytes) differs", i, sizes[i])
		}
	}
}

// failReceive is a Link whose Receive fails, as a link whose device went
// away would.
type failReceive struct {
	link.Link
	err error
}

func (f failReceive) Receive([]link.Datagram) (int, error) { return 0, f.err }

// TestAcceptSaysWhyReactorStopped checks that Accept and Dial on an
// endpoint whose link failed return the link's error, not only ErrClosed.
func TestAcceptSaysWhyReactorStopped(t *testing.T) {
	la, _ := link.MemPair(memA, memB, link.MemOptions{})
	injected := errors.New("injected receive failure")
	e := afxdp.NewEndpoint(failReceive{Link: la, err: injected}, afxdp.Options{Ticket: testTicket})
	t.Cleanup(func() { e.Close() })
	if _, err := e.Accept(); !errors.Is(err, injected) || !errors.Is(err, afxdp.ErrClosed) {
		t.Fatalf("Accept: %v, want ErrClosed wrapping the link's error", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.Dial(ctx, memB.String()); !errors.Is(err, injected) || !errors.Is(err, afxdp.ErrClosed) {
		t.Fatalf("Dial: %v, want ErrClosed wrapping the link's error", err)
	}
}
