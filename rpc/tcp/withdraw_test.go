package tcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// sentSignal is a Completion that hands the error to a channel.
type sentSignal chan error

func (s sentSignal) Sent(_ *wire.Message, err error) { s <- err }

// peerFrame is a frame a framePeer read, or why it stopped reading.
type peerFrame struct {
	h             wire.Header
	meta, payload []byte
	err           error
}

// framePeer accepts one connection (over TLS with cfg, when set), reads
// nothing of it until read is closed, then reads frames until an error,
// which it sends last.
func framePeer(t *testing.T, cfg *tls.Config) (addr string, read chan struct{}, frames <-chan peerFrame) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	read = make(chan struct{})
	out := make(chan peerFrame, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := l.Accept()
		l.Close()
		if err != nil {
			out <- peerFrame{err: err}
			return
		}
		defer nc.Close()
		var r io.Reader = nc
		if cfg != nil {
			tc := tls.Server(nc, cfg)
			tc.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				out <- peerFrame{err: err}
				return
			}
			r = tc
		}
		<-read
		nc.SetDeadline(time.Now().Add(20 * time.Second))
		br := bufio.NewReader(r)
		for {
			h, meta, payload, err := readRawFrame(br)
			out <- peerFrame{h, meta, payload, err}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr().String(), read, out
}

// nextFrame returns the peer's next frame, failing the test after 20s.
func nextFrame(t *testing.T, frames <-chan peerFrame) peerFrame {
	t.Helper()
	select {
	case f := <-frames:
		return f
	case <-time.After(20 * time.Second):
		t.Fatal("no frame from the peer for 20s")
		return peerFrame{}
	}
}

// tensorRequest is a request carrying data as one tensor; done hears of it.
func tensorRequest(id uint64, data []byte, done chan error) *wire.Message {
	return &wire.Message{
		Header:  wire.Header{Kind: wire.KindRequest, CallID: id},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}},
		Done:    sentSignal(done),
	}
}

// TestWithdrawCopiesOutsideLock: a request withdrawn while its 16 MiB frame
// is part written is finished from a copy made without the connection's
// lock, so that other calls queue meanwhile, and the writer, finding the
// rest of the frame being copied, gives up the write side instead of
// waiting (it may be the connection's reader). The peer still gets the
// frame whole and unchanged though its caller reused its memory, then the
// small request laid out behind it and what was queued during the copy;
// the big request laid out between them, none of which was written, and
// the one queued behind them never leave. When the connection fails
// during the copy, the writer's batch still completes.
func TestWithdrawCopiesOutsideLock(t *testing.T) {
	for _, failing := range []bool{false, true} {
		name := map[bool]string{false: "", true: "/failing"}[failing]
		t.Run("tcp"+name, func(t *testing.T) { testWithdrawCopiesOutsideLock(t, &Transport{StallTimeout: -1}, nil, failing) })
		t.Run("tls"+name, func(t *testing.T) {
			cli, srv := withdrawTLS(t)
			testWithdrawCopiesOutsideLock(t, &Transport{StallTimeout: -1, TLS: cli}, srv, failing)
		})
	}
}

// waitSent waits up to 20s for a Completion's error.
func waitSent(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s was not completed in 20s", what)
		return nil
	}
}

// locksWithin reports whether mu can be locked within d: it locks mu from
// a goroutine of its own and waits for that, so that a holder keeping mu
// for moments (the connection's reader or writer) only delays the answer,
// where a TryLock that met one of them would fail. A holder keeping it
// past d (the copier, calling the hook that asks) makes it false; the
// goroutine then takes and drops mu once the holder lets go.
func locksWithin(mu *sync.Mutex, d time.Duration) bool {
	locked := make(chan struct{})
	go func() {
		mu.Lock()
		//lint:ignore SA2001 taking mu is the event waited for: its holder let go
		mu.Unlock()
		close(locked)
	}()
	select {
	case <-locked:
		return true
	case <-time.After(d):
		return false
	}
}

// dialTCPConn dials addr over tr, within 10s.
func dialTCPConn(t *testing.T, tr *Transport, addr string) *conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*conn)
}

func testWithdrawCopiesOutsideLock(t *testing.T, tr *Transport, peerTLS *tls.Config, failing bool) {
	addr, read, frames := framePeer(t, peerTLS)
	var readOnce sync.Once
	startReading := func() { readOnce.Do(func() { close(read) }) }
	defer startReading()
	c := dialTCPConn(t, tr, addr)
	defer c.Close()

	const size = 16 << 20
	a, b, e := make([]byte, size), make([]byte, size), make([]byte, size)
	pattern(a, 1)
	pattern(b, 2)
	pattern(e, 4)
	var done [6]chan error
	for i := range done {
		done[i] = make(chan error, 1)
	}
	ma, mb, me := tensorRequest(1, a, done[1]), tensorRequest(2, b, done[2]), tensorRequest(4, e, done[4])
	mc := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 3}, Meta: []byte("queued during the copy"), Done: sentSignal(done[3])}
	mf := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 5}, Meta: []byte("laid out behind"), Done: sentSignal(done[5])}
	// Queued while corked, a, b and f make one batch, which uncork writes
	// at once, until the socket is full or its budget spent, leaving the
	// rest to a drainer: a is begun, b and f laid out and not. e waits in
	// the queue.
	c.cork()
	for _, m := range []*wire.Message{ma, mb, mf} {
		if err := c.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	c.uncork()
	if _, out := c.Progress(); out == 0 {
		t.Fatal("uncork wrote nothing")
	}
	if err := c.Send(me); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	inBatch := slices.Equal(c.out.msgs, []*wire.Message{ma, mb, mf})
	c.mu.Unlock()
	if !inBatch {
		t.Fatal("the first three requests are not the writer's batch")
	}
	// None of b was written: it leaves the batch, copied by nobody.
	if got := c.Withdraw(mb); got != rpc.Unsent {
		t.Fatalf("Withdraw of the request laid out but not begun = %v, want rpc.Unsent", got)
	}
	clear(b)

	var hookRan, lockFree, parked bool
	queuedWithdrawal := rpc.Kept
	withdrawCopyHook = func() {
		hookRan = true
		// The copier holding the lock would keep it for the whole copy,
		// this hook included.
		if !locksWithin(&c.mu, 10*time.Second) {
			return
		}
		lockFree = true
		if err := c.Send(mc); err != nil {
			t.Errorf("Send during the copy: %v", err)
		}
		startReading()
		// The writer, left with nothing but the rest being copied, gives
		// up the write side.
		parked = testwait.Until(10*time.Second, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return !c.writing && c.out.pending()
		})
		if failing {
			c.Close()
			return
		}
		// e, queued behind the batch, is still in the queue: the writer
		// cannot take the next batch before the rest is in place, after
		// which it would write e as soon as the peer reads.
		if parked {
			queuedWithdrawal = c.Withdraw(me)
		}
	}
	defer func() { withdrawCopyHook = nil }()
	if got := c.Withdraw(ma); got != rpc.Withdrawn {
		t.Fatalf("Withdraw of the part-written request = %v, want rpc.Withdrawn", got)
	}
	withdrawCopyHook = nil
	clear(a) // the caller's memory is its own again
	switch {
	case !hookRan:
		t.Fatal("the withdrawn request's rest was never copied")
	case !lockFree:
		t.Fatal("the withdrawn request's rest was copied under the connection's lock")
	case !parked:
		t.Fatal("the writer held the write side for 10s while the rest of a frame was being copied")
	case !failing && queuedWithdrawal != rpc.Unsent:
		t.Fatalf("Withdraw of the queued request during the copy = %v, want rpc.Unsent", queuedWithdrawal)
	}
	if !failing {
		clear(e)
	}
	if failing {
		for _, i := range []int{5, 3, 4} {
			if err := waitSent(t, done[i], fmt.Sprintf("request %d, behind the copy on a failed connection,", i)); err == nil {
				t.Errorf("request %d was sent on a closed connection", i)
			}
		}
		return
	}
	startReading()
	for _, i := range []int{5, 3} {
		if err := waitSent(t, done[i], fmt.Sprintf("request %d", i)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	f := nextFrame(t, frames)
	want := make([]byte, size)
	pattern(want, 1)
	if f.err != nil || f.h.CallID != 1 || !bytes.Equal(f.payload, want) {
		t.Fatalf("first frame: call %d, %d payload bytes, same as sent: %v, err %v; want call 1 whole and unchanged",
			f.h.CallID, len(f.payload), bytes.Equal(f.payload, want), f.err)
	}
	for _, m := range []*wire.Message{mf, mc} {
		if f = nextFrame(t, frames); f.err != nil || f.h.CallID != m.Header.CallID || string(f.meta) != string(m.Meta) {
			t.Fatalf("next frame: call %d %q, err %v; want call %d", f.h.CallID, f.meta, f.err, m.Header.CallID)
		}
	}
	c.Close()
	if f = nextFrame(t, frames); f.err == nil {
		t.Fatalf("frame of call %d after the connection closed; the withdrawn requests must send nothing more", f.h.CallID)
	}
	for _, i := range []int{1, 2, 4} {
		select {
		case err := <-done[i]:
			t.Errorf("withdrawn request %d was completed (%v)", i, err)
		default:
		}
	}
}

// slowPeer accepts connections and reads what they send at about rate
// bytes a second, answering nothing, until the test ends.
func slowPeer(tb testing.TB, rate int) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				const chunk = 64 << 10
				buf := make([]byte, chunk)
				per := time.Second * chunk / time.Duration(rate)
				for next := time.Now(); ; next = next.Add(per) {
					if _, err := io.ReadFull(nc, buf); err != nil {
						return
					}
					time.Sleep(time.Until(next)) // paces the peer's reads to rate
				}
			}()
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, nc := range conns {
			nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// BenchmarkWithdrawOverrun: callers make 16 MiB calls with short deadlines
// over one connection to a peer that reads slowly and never answers, so
// that every call gives up with its request queued, part written or laid
// out in the writer's batch. It reports how long after its deadline a call
// returns and how long the connection's lock, which every Send takes, was
// held at once (sampled).
func BenchmarkWithdrawOverrun(b *testing.B) {
	const (
		callers  = 8
		calls    = 3 // per caller and round
		size     = 16 << 20
		deadline = 30 * time.Millisecond
	)
	tr := &dialed{Transport: Transport{StallTimeout: -1}}
	client := rpc.NewClient(slowPeer(b, 400<<20), rpc.ClientOptions{Transport: tr, Keepalive: rpc.Keepalive{Time: -1}})
	defer client.Close()
	// A first call, which the peer never answers, dials the connection.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	var first rpc.Reply
	client.Call(ctx, mEcho, &rpc.Request{}, &first)
	cancel()
	tc := tr.last.Load()
	if tc == nil {
		b.Fatal("the client dialed no connection")
	}
	datas := make([][]byte, callers)
	for i := range datas {
		datas[i] = make([]byte, size)
		pattern(datas[i], uint64(i))
	}
	var overruns, waits []time.Duration
	var mu sync.Mutex
	b.ReportAllocs()
	for b.Loop() {
		stop := make(chan struct{})
		probed := make(chan []time.Duration)
		go func() {
			var w []time.Duration
			for {
				select {
				case <-stop:
					probed <- w
					return
				default:
				}
				start := time.Now()
				tc.mu.Lock()
				//lint:ignore SA2001 the wait to take mu is what is sampled
				tc.mu.Unlock()
				w = append(w, time.Since(start))
				time.Sleep(200 * time.Microsecond) // paces the lock-wait samples
			}
		}()
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := rpc.Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{size}, Data: datas[i]}}}
				for range calls {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					d, _ := ctx.Deadline()
					var reply rpc.Reply
					err := client.Call(ctx, mTensor, &req, &reply)
					over := time.Since(d)
					cancel()
					if !errors.Is(err, rpc.ErrDeadlineExceeded) {
						b.Errorf("call: %v, want deadline exceeded", err)
						return
					}
					mu.Lock()
					overruns = append(overruns, over)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(stop)
		waits = append(waits, <-probed...)
	}
	slices.Sort(overruns)
	slices.Sort(waits)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	at := func(s []time.Duration, q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	if len(overruns) > 0 {
		b.ReportMetric(ms(at(overruns, 0.5)), "overrun-p50-ms")
		b.ReportMetric(ms(at(overruns, 0.9)), "overrun-p90-ms")
		b.ReportMetric(ms(overruns[len(overruns)-1]), "overrun-max-ms")
	}
	if len(waits) > 0 {
		b.ReportMetric(ms(at(waits, 0.99)), "lockwait-p99-ms")
		b.ReportMetric(ms(waits[len(waits)-1]), "lockwait-max-ms")
	}
}

// dialed is a Transport that keeps the last connection it dialed, for a
// test that watches the connection under a client.
type dialed struct {
	Transport
	last atomic.Pointer[conn]
}

func (t *dialed) Dial(ctx context.Context, addr string) (rpc.Conn, error) {
	c, err := t.Transport.Dial(ctx, addr)
	if err == nil {
		t.last.Store(c.(*conn))
	}
	return c, err
}

// TestWithdrawnFramesArriveWhole: callers send requests of 1 KiB to 8 MiB
// with deadlines of a few milliseconds over one connection to a peer that
// reads slowly, withdraw them when the deadline passes and scribble over
// their memory at once. The peer must get only whole frames, each as its
// caller made it; every request completed or withdrawn part way, and none
// withdrawn unsent.
func TestWithdrawnFramesArriveWhole(t *testing.T) {
	t.Run("tcp", func(t *testing.T) { testWithdrawnFramesArriveWhole(t, &Transport{StallTimeout: -1}, nil) })
	t.Run("tls", func(t *testing.T) {
		cli, srv := withdrawTLS(t)
		testWithdrawnFramesArriveWhole(t, &Transport{StallTimeout: -1, TLS: cli}, srv)
	})
}

// withdrawTLS returns the client's and the peer's TLS configurations,
// under a CA of the test's own.
func withdrawTLS(t *testing.T) (cli, srv *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, "cluster CA")
	srv, err := ca.files(t, dir, "server").ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cli, err = ca.files(t, dir, "client").ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cli, srv
}

func testWithdrawnFramesArriveWhole(t *testing.T, tr *Transport, peerTLS *tls.Config) {
	addr, read, frames := framePeer(t, peerTLS)
	close(read)
	c := dialTCPConn(t, tr, addr)
	defer c.Close()

	// The peer checks each frame against the pattern its call id seeds.
	got := make(chan map[uint64]bool, 1)
	go func() {
		seen := map[uint64]bool{}
		var want []byte
		for f := range frames {
			if f.err != nil {
				if !errors.Is(f.err, io.EOF) {
					t.Errorf("peer: %v", f.err)
				}
				break
			}
			want = slices.Grow(want[:0], len(f.payload))[:len(f.payload)]
			pattern(want, f.h.CallID)
			if !bytes.Equal(f.payload, want) {
				t.Errorf("call %d: its %d bytes differ from what its caller sent", f.h.CallID, len(f.payload))
			}
			seen[f.h.CallID] = true
		}
		got <- seen
	}()

	const callers = 6
	stop := time.Now().Add(time.Second)
	var mu sync.Mutex
	outcome := map[uint64]rpc.Withdrawal{} // Kept: completed
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8<<20)
			done := make(chan error, 1)
			for n := uint64(1); n <= 200 && time.Now().Before(stop); n++ {
				id := uint64(g)<<32 | n
				size := 1 << (10 + (id*7)%14) // 1 KiB to 8 MiB
				data := buf[:size]
				pattern(data, id)
				m := tensorRequest(id, data, done)
				if err := c.Send(m); err != nil {
					t.Errorf("send: %v", err)
					return
				}
				timer := time.NewTimer(time.Duration(1+id%5) * time.Millisecond)
				var w rpc.Withdrawal
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("call %d: %v", id, err)
						return
					}
				case <-timer.C:
					if w = c.Withdraw(m); w == rpc.Completing {
						if err := <-done; err != nil {
							t.Errorf("call %d: %v", id, err)
							return
						}
						w = rpc.Kept
					}
				}
				timer.Stop()
				clear(data) // the memory is the caller's again
				mu.Lock()
				outcome[id] = w
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	last := make(chan error, 1)
	if err := c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1 << 63}, Done: sentSignal(last)}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-last:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the last request was not written in 20s")
	}
	c.Close()
	var seen map[uint64]bool
	select {
	case seen = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the peer did not finish reading in 20s")
	}
	count := map[rpc.Withdrawal]int{}
	for id, w := range outcome {
		count[w]++
		if arrived := seen[id]; arrived != (w != rpc.Unsent) {
			t.Errorf("call %d (withdrawal %v): arrived %v", id, w, arrived)
		}
	}
	t.Logf("%d calls: %d completed, %d withdrawn part way, %d withdrawn unsent; %d frames read", len(outcome), count[rpc.Kept], count[rpc.Withdrawn], count[rpc.Unsent], len(seen))
	if count[rpc.Withdrawn] == 0 || count[rpc.Unsent] == 0 {
		t.Logf("no call withdrawn part way or unsent: the test did not exercise what it is about")
	}
}
