package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

// halfAnswerPeer serves one connection as a peer that answers the call
// numbered split (from 0) in two parts, the second part only once release
// is closed, and every other call whole. It reports each request it reads
// on requests.
func halfAnswerPeer(t *testing.T, split int, release <-chan struct{}) (addr string, requests <-chan wire.Header) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reqs := make(chan wire.Header, 16)
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		go func() { // the test's end unblocks the reads below
			<-t.Context().Done()
			nc.Close()
		}()
		for n := 0; ; n++ {
			h, meta, _, err := readRawFrame(nc)
			if err != nil {
				return
			}
			reqs <- h
			if h.Kind != wire.KindRequest {
				continue
			}
			frame := rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindResponse, Method: h.Method, CallID: h.CallID}, Meta: meta})
			if n == split {
				half := len(frame) / 2
				if _, err := nc.Write(frame[:half]); err != nil {
					return
				}
				select {
				case <-release:
				case <-t.Context().Done():
					return
				}
				frame = frame[half:]
			}
			if _, err := nc.Write(frame); err != nil {
				return
			}
		}
	}()
	return l.Addr().String(), reqs
}

// A caller whose context can end reads its own answer, and when its
// context ends part way through the answer's frame it returns at once; the
// receiving goroutine takes the read side back at the frame's boundary, so
// the connection carries the next calls. A context new to the connection
// is watched by a context.AfterFunc, one that callers bring again by the
// connection's watcher goroutine (shared).
func TestContextEndsOwnRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ctx    func() (context.Context, context.CancelFunc)
		want   wire.Code
		shared bool
	}{
		{"cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, wire.Cancelled, false},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, wire.DeadlineExceeded, false},
		{"shared/cancel", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, wire.Cancelled, true},
		{"shared/deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, wire.DeadlineExceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			split := 1
			if tc.shared {
				split = 3
			}
			addr, reqs := halfAnswerPeer(t, split, release)
			c := NewClient(addr, ClientOptions{Transport: tcpTransport()})
			defer c.Close()
			bg := context.Background()
			if err := echoOnce(bg, c, []byte("first")); err != nil {
				t.Fatal(err)
			}
			<-reqs
			if got := readSideOf(t, c); got != nobodyReads {
				t.Fatalf("after the first call the read side is %d, want it left to the next caller", got)
			}
			ctx, cancel := tc.ctx()
			defer cancel()
			for i := 1; i < split; i++ {
				if err := echoOnce(ctx, c, []byte("under the shared context")); err != nil {
					t.Fatal(err)
				}
				<-reqs
			}
			if tc.shared && !watchedBy(c, ctx) {
				t.Fatal("a context brought twice is not the watcher's")
			}
			ended := make(chan error, 1)
			go func() { ended <- echoOnce(ctx, c, []byte("second, answered in two parts")) }()
			<-reqs
			if got := readSideOf(t, c); got != callerReads {
				t.Fatalf("while the second call waits the read side is %d, want its caller's (%d)", got, callerReads)
			}
			start := time.Now()
			if tc.want == wire.Cancelled {
				cancel()
			} else {
				d, _ := ctx.Deadline()
				start = d
			}
			var err error
			select {
			case err = <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the call did not return 10s after its context ended")
			}
			if CodeOf(err) != tc.want {
				t.Fatalf("the call ended with %v, want %v", err, tc.want)
			}
			if waited := time.Since(start); waited > time.Second || waited < 0 {
				t.Errorf("the call returned %v after its context ended", waited)
			}
			close(release)
			for range 3 {
				if err := echoOnce(bg, c, []byte("after")); err != nil {
					t.Fatalf("call after the interrupted one: %v", err)
				}
			}
			if st := c.Stats(); st.Reconnects != 0 {
				t.Fatalf("stats = %+v, want the first connection kept", st)
			}
		})
	}
}

// A caller whose context can end leaves an answer longer than what it
// reads whole to the receiving goroutine, and still gets it; the receiving
// goroutine then keeps the read side until a short answer.
func TestLongAnswerUnderWatch(t *testing.T) {
	env := newTestEnv(t)
	bg := context.Background()
	if err := echoOnce(bg, env.client, []byte("first")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 20*time.Second)
	defer cancel()
	// The longest answer a caller reads whole is what the connection's
	// read buffer holds.
	whole := int(wholeLimitOf(t, env.client))
	for _, n := range []int{whole - 100, whole, 4 * whole} {
		data := make([]byte, n)
		pattern(data, uint64(n))
		req := Request{Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: data}}}
		var reply Reply
		if err := env.client.Call(ctx, mTensor, &req, &reply); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if len(reply.Tensors) != 1 || !bytes.Equal(reply.Tensors[0].Data, data) {
			t.Fatalf("%d bytes: tensor mismatch", n)
		}
		reply.Release()
		if got, long := readSideOf(t, env.client), n > whole; long && got != readerReads {
			t.Fatalf("after a %d-byte answer the read side is %d, want the receiving goroutine's (%d)", n, got, readerReads)
		}
		if err := echoOnce(ctx, env.client, []byte("between")); err != nil {
			t.Fatal(err)
		}
		if got := readSideOf(t, env.client); got != nobodyReads {
			t.Fatalf("after a short answer the read side is %d, want it left to the next caller (%d)", got, nobodyReads)
		}
	}
}

// Callers with contexts of their own, one after another on a connection
// whose read side they take in turn, some ending before their answer:
// every live call gets its own answer.
func TestManyContextsUnderWatch(t *testing.T) {
	env := newTestEnv(t)
	bg := context.Background()
	if err := echoOnce(bg, env.client, []byte("first")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 300 && time.Now().Before(deadline); i++ {
		ctx, cancel := context.WithCancel(bg)
		if i%7 == 3 {
			cancel()
		}
		err := echoOnce(ctx, env.client, []byte{byte(i), byte(i >> 8)})
		cancel()
		switch {
		case i%7 == 3 && CodeOf(err) != wire.Cancelled && err != nil:
			t.Fatalf("call %d with an ended context: %v", i, err)
		case i%7 != 3 && err != nil:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := echoOnce(bg, env.client, []byte("last")); err != nil {
		t.Fatal(err)
	}
	if st := env.client.Stats(); st.Reconnects != 0 {
		t.Fatalf("stats = %+v, want the first connection kept", st)
	}
	var st *Status
	if err := echoOnce(bg, env.client, nil); err != nil && errors.As(err, &st) {
		t.Fatal(err)
	}
}

// watchedBy reports whether the connection's watcher goroutine watches ctx.
func watchedBy(c *Client, ctx context.Context) bool {
	c.mu.Lock()
	cc := c.cc
	c.mu.Unlock()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.watcher && cc.watched == ctx.Done()
}

// FuzzOwnReadAnswer answers a call whose caller reads its own answer under
// a context that can end with arbitrary bytes (their call id, when they are
// long enough to hold one, set to the call's), then closes the connection:
// whatever the bytes, the call returns at once, with an answer or an
// error. (TestContextEndsOwnRead covers a peer that stops part way.)
func FuzzOwnReadAnswer(f *testing.F) {
	for _, m := range []*wire.Message{
		{Header: wire.Header{Kind: wire.KindResponse, Method: mEcho.ID}, Meta: []byte("answer")},
		{Header: wire.Header{Kind: wire.KindError, Status: wire.Internal}, Meta: []byte("failed")},
		{Header: wire.Header{Kind: wire.KindResponse, Method: mTensor.ID},
			Tensors: []wire.Tensor{{DType: wire.DTInt32, Shape: []int64{2}, Data: make([]byte, 8)}}},
		{Header: wire.Header{Kind: wire.KindPing}},
		{Header: wire.Header{Kind: wire.KindResponse, Method: mEcho.ID}, Meta: make([]byte, 70<<10)},
	} {
		frame, err := wire.AppendHead(nil, m)
		if err != nil {
			f.Fatal(err)
		}
		for _, t := range m.Tensors {
			frame = append(frame, t.Data...)
		}
		f.Add(frame)
		f.Add(frame[:len(frame)/2])
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		served := make(chan struct{})
		defer func() {
			l.Close() // ends an Accept that never got a connection
			<-served
		}()
		go func() {
			defer close(served)
			nc, err := l.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			for n := 0; ; n++ {
				h, meta, _, err := readRawFrame(nc)
				if err != nil {
					return
				}
				if h.Kind != wire.KindRequest {
					continue
				}
				out := rawFrame(t, &wire.Message{Header: wire.Header{Kind: wire.KindResponse, Method: h.Method, CallID: h.CallID}, Meta: meta})
				if n == 1 {
					out = append([]byte(nil), answer...)
					if len(out) >= 24 {
						binary.LittleEndian.PutUint64(out[16:], h.CallID)
					}
				}
				if _, err := nc.Write(out); err != nil || n == 1 {
					return
				}
			}
		}()
		c := NewClient(l.Addr().String(), ClientOptions{Transport: tcpTransport(), FailFast: true})
		defer c.Close()
		bg := context.Background()
		if err := echoOnce(bg, c, []byte("first")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		var reply Reply
		err = c.Call(ctx, mEcho, &Request{Meta: []byte("fuzzed")}, &reply)
		reply.Release()
		if CodeOf(err) == wire.DeadlineExceeded {
			t.Fatalf("a call answered with %q and a closed connection waited for its deadline", answer)
		}
		c.Close()
	})
}
