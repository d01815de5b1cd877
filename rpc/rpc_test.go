package rpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/wire"
)

var (
	mEcho   = NewMethod("Echo")
	mSleep  = NewMethod("Sleep")
	mWait   = NewMethod("WaitCancel")
	mPanic  = NewMethod("Panic")
	mTensor = NewMethod("Tensor")
	// mDeferEcho echoes from a goroutine of its own, after its handler
	// has returned.
	mDeferEcho = NewMethod("DeferEcho")
)

type testEnv struct {
	srv    *Server
	addr   string
	client *Client
	waited chan error // WaitCancel reports what ended its wait
	// entered gets a value when a WaitCancel handler begins to wait, so
	// that a test cancels a call its handler already holds.
	entered chan struct{}
}

func newTestEnv(t testing.TB) *testEnv {
	t.Helper()
	return newTestEnvOn(t, tcpTransport())
}

// newTestEnvOn is newTestEnv over tr, with the server's fields set by
// configure (if any) before it serves.
func newTestEnvOn(t testing.TB, tr Transport, configure ...func(*Server)) *testEnv {
	t.Helper()
	env := &testEnv{srv: NewServer(), waited: make(chan error, 16), entered: make(chan struct{}, 16)}
	for _, f := range configure {
		f(env.srv)
	}
	env.srv.Register(mEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{Inline: true})
	env.srv.Register(mDeferEcho, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		resp.Meta = append(resp.Meta, req.Meta...)
		answer, ok := resp.Defer()
		if !ok {
			return nil
		}
		go answer(nil)
		return ErrDeferred
	}, HandlerOptions{Deferrable: true})
	env.srv.Register(mSleep, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		d := time.Duration(binary.LittleEndian.Uint64(req.Meta))
		time.Sleep(d) // the handler's work: Sleep stands for a slow handler
		resp.Meta = append(resp.Meta, req.Meta...)
		return nil
	}, HandlerOptions{})
	env.srv.Register(mWait, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		select {
		case env.entered <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			env.waited <- ctx.Err()
			return ctx.Err()
		case <-time.After(10 * time.Second):
			env.waited <- errors.New("not cancelled")
			return nil
		}
	}, HandlerOptions{})
	env.srv.Register(mPanic, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		panic("boom")
	}, HandlerOptions{})
	env.srv.Register(mTensor, func(ctx context.Context, req *wire.Inbound, resp *Response) error {
		// Answer with a copy: an echo must not send back its receive buffer.
		for _, in := range req.Tensors {
			buf := wire.NewBuffer(len(in.Data))
			copy(buf.Bytes(), in.Data)
			resp.Tensors = append(resp.Tensors, wire.Tensor{DType: in.DType, Shape: append([]int64(nil), in.Shape...), Data: buf.Bytes(), Buf: buf})
		}
		return nil
	}, HandlerOptions{})
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go env.srv.Serve(l)
	env.addr = l.Addr().String()
	env.client = NewClient(env.addr, ClientOptions{Transport: tr})
	t.Cleanup(func() {
		env.client.Close()
		env.srv.Close()
	})
	return env
}

func TestEcho(t *testing.T) {
	env := newTestEnv(t)
	var reply Reply
	err := env.client.Call(context.Background(), mEcho, &Request{Meta: []byte("hello")}, &reply)
	if err != nil || string(reply.Meta) != "hello" {
		t.Fatalf("Echo = %q, %v", reply.Meta, err)
	}
	reply.Release()
}

func TestManyConcurrentCallsOutOfOrder(t *testing.T) {
	env := newTestEnv(t)
	const n = 1000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	order := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			meta := binary.LittleEndian.AppendUint64(nil, uint64(rand.IntN(20))*uint64(time.Millisecond))
			meta = binary.LittleEndian.AppendUint64(meta, uint64(i))
			var reply Reply
			defer reply.Release()
			if err := env.client.Call(context.Background(), mSleep, &Request{Meta: meta}, &reply); err != nil {
				errs <- err
				return
			}
			if !bytes.Equal(reply.Meta, meta) {
				errs <- fmt.Errorf("call %d got %x", i, reply.Meta)
			}
			order <- i
		}()
	}
	wg.Wait()
	close(errs)
	close(order)
	for err := range errs {
		t.Fatal(err)
	}
	inOrder, prev := true, -1
	for i := range order {
		if i < prev {
			inOrder = false
		}
		prev = i
	}
	if inOrder {
		t.Fatal("1000 calls with random delays completed in issue order: no reordering observed")
	}
}

func TestDeadlineReachesHandler(t *testing.T) {
	env := newTestEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var reply Reply
	err := env.client.Call(ctx, mWait, &Request{}, &reply)
	if !errors.Is(err, ErrDeadlineExceeded) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	select {
	case got := <-env.waited:
		if !errors.Is(got, context.DeadlineExceeded) {
			t.Fatalf("handler saw %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler never saw the deadline")
	}
}

func TestCancelReachesHandler(t *testing.T) {
	env := newTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled once the handler holds the call, so that the cancel has
	// a handler to reach; if it never gets there the call fails below.
	go func() {
		defer cancel()
		select {
		case <-env.entered:
		case <-time.After(10 * time.Second):
		}
	}()
	var reply Reply
	err := env.client.Call(ctx, mWait, &Request{}, &reply)
	if !errors.Is(err, ErrCancelled) {
		t.Fatalf("err = %v, want cancelled", err)
	}
	select {
	case got := <-env.waited:
		if !errors.Is(got, ErrCancelled) {
			t.Fatalf("handler saw %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler never saw the cancel")
	}
}

func TestUnknownMethodAndPanic(t *testing.T) {
	env := newTestEnv(t)
	var reply Reply
	err := env.client.Call(context.Background(), NewMethod("Nope"), &Request{}, &reply)
	if !errors.Is(err, ErrUnimplemented) {
		t.Fatalf("unknown method: %v", err)
	}
	err = env.client.Call(context.Background(), mPanic, &Request{}, &reply)
	var st *Status
	if !errors.As(err, &st) || st.Code != wire.Internal {
		t.Fatalf("panic: %v", err)
	}
	// The server keeps serving.
	if err := env.client.Call(context.Background(), mEcho, &Request{Meta: []byte("x")}, &reply); err != nil {
		t.Fatal(err)
	}
	reply.Release()
}

func TestTensorRoundTrip(t *testing.T) {
	env := newTestEnv(t)
	for _, n := range []int{0, 4, 4 << 10, 1 << 20, 16 << 20} {
		data := make([]byte, n)
		pattern(data, uint64(n))
		req := Request{Meta: []byte("m"), Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(n)}, Data: data}}}
		var reply Reply
		if err := env.client.Call(context.Background(), mTensor, &req, &reply); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if len(reply.Tensors) != 1 || !bytes.Equal(reply.Tensors[0].Data, data) {
			t.Fatalf("%d bytes: tensor mismatch", n)
		}
		reply.Release()
	}
}

func TestBadRequestTensorRefused(t *testing.T) {
	env := newTestEnv(t)
	req := Request{Tensors: []wire.Tensor{{DType: wire.DTFloat, Shape: []int64{3}, Data: make([]byte, 5)}}}
	var reply Reply
	if err := env.client.Call(context.Background(), mTensor, &req, &reply); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("err = %v", err)
	}
}

func TestErrorMessageNamesCallAndPeer(t *testing.T) {
	env := newTestEnv(t)
	env.client.opts.Name = "ps:0"
	var reply Reply
	err := env.client.Call(context.Background(), NewMethod("RecvTensor"), &Request{}, &reply)
	if want := "rpc: call RecvTensor to ps:0: unimplemented"; err == nil || !bytes.HasPrefix([]byte(err.Error()), []byte(want)) {
		t.Fatalf("err = %v, want prefix %q", err, want)
	}
}

// NewClient without a transport fails where the client is made, saying
// which transport to give it: rpc links none of its own.
func TestNewClientWithoutTransportPanics(t *testing.T) {
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "ClientOptions.Transport is nil") || !strings.Contains(msg, "tcp.Transport") {
			t.Fatalf("NewClient without a transport: recovered %q, want a panic naming the missing transport", msg)
		}
	}()
	NewClient("127.0.0.1:1", ClientOptions{})
}
