package rpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/rpc/rpctest"
	"github.com/starwire/starwire/wire"
)

// pattern fills b with bytes derived from seed.
//
// It draws one block from seed, repeats it by copying, and stamps every
// 4 KiB with its offset, so that bytes moved, repeated or
// dropped anywhere in b still differ from the pattern: copies cost a
// memmove, which the race detector checks by the range, where drawing
// every word took it a second per 16 MiB.
func pattern(b []byte, seed uint64) {
	const block, stamp = 64 << 10, 4 << 10
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := min(len(b), block) &^ 7
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n; n > 0 && i < len(b); {
		i += copy(b[i:], b[:i])
	}
	for off := block; off+8 <= len(b); off += stamp {
		binary.LittleEndian.PutUint64(b[off:], uint64(off)^seed*0x9e3779b97f4a7c15)
	}
}

// rawFrame encodes m as a stream transport writes it.
func rawFrame(t testing.TB, m *wire.Message) []byte {
	t.Helper()
	b, err := wire.AppendHead(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range m.Tensors {
		b = append(b, tn.Data...)
	}
	return b
}

// readRawFrame reads one frame from r: its header, meta and payload.
func readRawFrame(r io.Reader) (wire.Header, []byte, []byte, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return wire.Header{}, nil, nil, err
	}
	h, err := wire.ParseHeader(hb[:], nil)
	if err != nil {
		return h, nil, nil, err
	}
	head := make([]byte, int(h.MetaLen)+int(h.DescLen))
	if _, err := io.ReadFull(r, head); err != nil {
		return h, nil, nil, err
	}
	payload := make([]byte, h.PayloadLen)
	_, err = io.ReadFull(r, payload)
	return h, head[:h.MetaLen], payload, err
}

// TestBulkBothWaysNeverWedges: callers echo multi-MiB tensors both ways on
// one connection, answered by an inline handler (whose answers the reader
// used to write itself) and by goroutine handlers. When each side's reader
// waited to write, each for the other to read, this wedged in under a
// second.
func TestBulkBothWaysNeverWedges(t *testing.T) {
	env := newTestEnv(t)
	inlineEcho := NewMethod("InlineTensorEcho")
	env.srv.Register(inlineEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		for i := range req.Tensors {
			tn := &req.Tensors[i]
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: tn.DType, Shape: tn.Shape, Data: tn.Data})
		}
		return nil
	}, HandlerOptions{Inline: true})
	const callers = 8
	stop := time.Now().Add(2 * time.Second)
	var calls, bytesOK atomic.Int64
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := inlineEcho
			if c%2 == 1 {
				m = mTensor
			}
			for seed := uint64(c) << 32; time.Now().Before(stop); seed++ {
				n := (4 << 20) + rand.IntN(12<<20)
				n &^= 7
				data := make([]byte, n)
				pattern(data, seed)
				// A wedge never ends; the deadline only bounds how long
				// saying so takes, far past what a loaded machine under
				// the race detector needs for a 16 MiB echo (seconds).
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				var reply Reply
				err := env.client.Call(ctx, m, &Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: data}}}, &reply)
				cancel()
				if err != nil {
					t.Errorf("caller %d: %v", c, err)
					return
				}
				if len(reply.Tensors) != 1 || !bytes.Equal(reply.Tensors[0].Data, data) {
					t.Errorf("caller %d: answer differs from the request", c)
				}
				reply.Release()
				calls.Add(1)
				bytesOK.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls, %d MiB verified", calls.Load(), bytesOK.Load()>>20)
}

// TestDeadlineKeptWhilePeerReadsNothing: calls whose 16 MiB requests the
// peer does not read (one half written, the others queued) return within
// a few milliseconds of their deadlines, and the half-written frame still
// reaches the peer whole and unchanged after its caller reused its memory.
func TestDeadlineKeptWhilePeerReadsNothing(t *testing.T) {
	addr, read, conns := rpctest.StuckPeer(t)
	// The peer reads once every call has returned, which on a loaded
	// machine under the race detector came after the stall timeout (20s
	// from the first write, while the test made the other requests) had
	// failed the connection and cut the frame short: nothing here is
	// about that timeout.
	client := NewClient(addr, ClientOptions{Transport: NewStream(StreamOptions{StallTimeout: -1}), Keepalive: Keepalive{Time: -1}})
	defer client.Close()
	const callers, size = 4, 16 << 20
	const timeout = 300 * time.Millisecond
	datas := make([][]byte, callers)
	var wg sync.WaitGroup
	var worst atomic.Int64
	lateness := watchLateness()
	for i := range callers {
		datas[i] = make([]byte, size)
		pattern(datas[i], uint64(i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			deadline, _ := ctx.Deadline()
			var reply Reply
			err := client.Call(ctx, mTensor, &Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{size}, Data: datas[i]}}}, &reply)
			over := time.Since(deadline)
			for {
				if w := worst.Load(); int64(over) <= w || worst.CompareAndSwap(w, int64(over)) {
					break
				}
			}
			if !errors.Is(err, ErrDeadlineExceeded) {
				t.Errorf("call %d: err = %v, want deadline exceeded", i, err)
			}
			clear(datas[i]) // the caller's memory is its own again
		}()
	}
	wg.Wait()
	late := lateness.stop()
	// A call that gives up copies what is left of its frame, if the writer
	// has begun it, before it returns; only one frame is begun at a time,
	// but the copies run side by side on a machine with few CPUs: at most
	// callers copies of size bytes into fresh buffers, which the same
	// copies made here measure (on a loaded machine under the race
	// detector, hundreds of milliseconds).
	start := time.Now()
	for i := range callers {
		b := wire.NewBuffer(size)
		copy(b.Bytes(), datas[i])
		b.Release()
	}
	copies := time.Since(start)
	// What the machine adds by waking callers late is not the transport's.
	// A call that gives up crosses a few wake-ups, each of which can be
	// that late.
	w := time.Duration(worst.Load())
	if w > 100*time.Millisecond+3*late+copies {
		t.Errorf("a call returned %v after its deadline (timers ran up to %v late meanwhile; %d copies of its size took %v)", w, late, callers, copies)
	}
	t.Logf("longest overrun %v; timers up to %v late; %d copies of %d bytes took %v", w, late, callers, size, copies)
	close(read)
	nc := <-conns
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	h, _, payload, err := readRawFrame(br)
	if err != nil {
		t.Fatalf("reading the half-written frame: %v", err)
	}
	if h.Kind != wire.KindRequest || len(payload) != size {
		t.Fatalf("first frame: %v with %d payload bytes", h.Kind, len(payload))
	}
	matched := false
	for i := range callers {
		want := make([]byte, size)
		pattern(want, uint64(i))
		matched = matched || bytes.Equal(payload, want)
	}
	if !matched {
		t.Error("the half-written frame was finished from memory its caller had reused")
	}
}

// TestKeepaliveFailsSilentPeer: a peer that reads calls but never answers,
// not even pings, fails the connection after Time+Timeout, so a call without
// a deadline does not wait for ever.
func TestKeepaliveFailsSilentPeer(t *testing.T) {
	addr, read, conns := rpctest.StuckPeer(t)
	close(read)
	go func() {
		nc := <-conns
		defer nc.Close()
		io.Copy(io.Discard, nc)
	}()
	ka := Keepalive{Time: 50 * time.Millisecond, Timeout: 100 * time.Millisecond}
	client := NewClient(addr, ClientOptions{Transport: tcpTransport(), Keepalive: ka})
	defer client.Close()
	start := time.Now()
	var reply Reply
	err := client.Call(context.Background(), mEcho, &Request{Meta: []byte("hello")}, &reply)
	took := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "keepalive") {
		t.Fatalf("err = %v, want unavailable after keepalive", err)
	}
	if limit := 10 * (ka.Time + ka.Timeout); took > limit {
		t.Errorf("call failed after %v, want within %v", took, limit)
	}
}

// TestOversizedFrameFailsOnlyItsCall: a request over the server's payload
// limit is skipped without allocating its claim and answered with
// ResourceExhausted; the connection goes on serving.
func TestOversizedFrameFailsOnlyItsCall(t *testing.T) {
	srv := NewServer()
	srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	tr := NewStream(StreamOptions{Limits: wire.Limits{MaxMeta: 1 << 10, MaxTensors: 4, MaxPayload: 1 << 20}})
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	big := make([]byte, 2<<20)
	over := rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: mEcho.ID, CallID: 1},
		Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(big))}, Data: big}}})
	fine := rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: mEcho.ID, CallID: 2}, Meta: []byte("still here")})
	go func() { nc.Write(append(over, fine...)) }()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	h, meta, _, err := readRawFrame(br)
	if err != nil || h.Kind != wire.KindError || h.CallID != 1 || h.Status != wire.ResourceExhausted {
		t.Fatalf("answer to the oversized call: %+v %q %v, want a resource-exhausted error for call 1", h, meta, err)
	}
	h, meta, _, err = readRawFrame(br)
	if err != nil || h.Kind != wire.KindResponse || h.CallID != 2 || string(meta) != "still here" {
		t.Fatalf("answer to the next call: %+v %q %v", h, meta, err)
	}
}

// TestConcurrentCallsLimited: calls past MaxConcurrentCalls on a
// connection fail at once with ResourceExhausted.
func TestConcurrentCallsLimited(t *testing.T) {
	env := newTestEnvOn(t, tcpTransport(), func(s *Server) { s.MaxConcurrentCalls = 2 })
	block := NewMethod("Block")
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	env.srv.Register(block, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		started <- struct{}{}
		<-release
		return nil
	}, HandlerOptions{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var reply Reply
			if err := env.client.Call(context.Background(), block, &Request{}, &reply); err != nil {
				t.Error(err)
			}
			reply.Release()
		}()
	}
	<-started
	<-started
	var reply Reply
	err := env.client.Call(context.Background(), block, &Request{}, &reply)
	close(release)
	wg.Wait()
	if !errors.Is(err, ErrResourceExhausted) {
		t.Fatalf("third call: err = %v, want resource exhausted", err)
	}
}

// TestPeerNotReadingAnswersIsHeldBack: a peer that sends requests and reads
// none of the answers makes the server stop reading it once the answers
// waiting to be sent pass SendBudget; closing the peer frees them.
func TestPeerNotReadingAnswersIsHeldBack(t *testing.T) {
	const answer, budget, requests = 1 << 20, 4 << 20, 400
	srv := NewServer()
	srv.SendBudget = budget
	gen := NewMethod("Gen")
	shared := make([]byte, answer)
	var served atomic.Int64
	srv.Register(gen, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		served.Add(1)
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{answer}, Data: shared})
		return nil
	}, HandlerOptions{Inline: true})
	l, err := tcpTransport().Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var reqs []byte
	for i := range requests {
		reqs = append(reqs, rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: gen.ID, CallID: uint64(i + 1)}})...)
	}
	go nc.Write(reqs)
	sc := waitServerConn(t, srv, func(sc *serverConn) bool { return sc.waiting.Load() })
	t.Logf("reader waits with %d answer bytes queued after %d requests", sc.answering.Load(), served.Load())
	if got := sc.answering.Load(); got > budget+answer {
		t.Errorf("%d answer bytes waiting, budget %d", got, budget)
	}
	if n := served.Load(); n >= requests {
		t.Errorf("served all %d requests of a peer that reads nothing", n)
	}
	nc.Close()
	testwait.Eventually(t, 10*time.Second, func() bool { return sc.answering.Load() == 0 },
		"the answer bytes held (%d) to be let go after the peer closed", sc.answering.Load())
}

// waitServerConn polls, for a bounded time, until srv's one connection
// satisfies ok.
func waitServerConn(t *testing.T, srv *Server, ok func(*serverConn) bool) *serverConn {
	t.Helper()
	var found *serverConn
	testwait.Eventually(t, 10*time.Second, func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		for sc := range srv.conns {
			if ok(sc) {
				found = sc
				return true
			}
		}
		return false
	}, "the server connection to reach the expected state")
	return found
}

// TestConnectionFloodBounded: connections past MaxConnsPerHost are closed
// as they arrive; those within keep being served.
func TestConnectionFloodBounded(t *testing.T) {
	env := newTestEnvOn(t, tcpTransport(), func(s *Server) { s.MaxConnsPerHost = 8 })
	var reply Reply
	if err := env.client.Call(context.Background(), mEcho, &Request{Meta: []byte("first")}, &reply); err != nil {
		t.Fatal(err)
	}
	reply.Release()
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			nc.Close()
		}
	}()
	closed := 0
	for range 32 {
		nc, err := net.Dial("tcp", env.addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, nc)
		// A refused connection is closed by the server: a read ends. A
		// served one answers a ping.
		nc.Write(rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindPing, CallID: 9}}))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if h, _, _, err := readRawFrame(nc); errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("connection %d neither served nor closed within 5s", len(open))
		} else if err != nil {
			closed++
		} else if h.Kind != wire.KindPong {
			t.Fatalf("answer to a ping: %v", h.Kind)
		}
	}
	if served := 32 - closed; served != 8-1 {
		t.Errorf("%d of 32 connections served beside the client's, want %d", served, 8-1)
	}
	if err := env.client.Call(context.Background(), mEcho, &Request{Meta: []byte("still")}, &reply); err != nil {
		t.Fatalf("the client's own connection: %v", err)
	}
	reply.Release()
}

// A latenessWatch measures how late 1ms timers fire while it runs: on a
// loaded machine (or under the race detector) a caller can be woken that
// much after its deadline whatever the transport does.
type latenessWatch struct {
	done  chan struct{}
	worst chan time.Duration
}

func watchLateness() *latenessWatch {
	w := &latenessWatch{done: make(chan struct{}), worst: make(chan time.Duration, 1)}
	go func() {
		var worst time.Duration
		for {
			select {
			case <-w.done:
				w.worst <- worst
				return
			default:
			}
			start := time.Now()
			time.Sleep(time.Millisecond) // the probe: how late a 1ms timer wakes is what it measures
			worst = max(worst, time.Since(start)-time.Millisecond)
		}
	}()
	return w
}

func (w *latenessWatch) stop() time.Duration {
	close(w.done)
	return <-w.worst
}

func TestCodeOfNilAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { CodeOf(nil) }); n != 0 {
		t.Errorf("CodeOf(nil) allocates %v times", n)
	}
}
