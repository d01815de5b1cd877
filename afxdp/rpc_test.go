package afxdp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire"
)

var (
	methodEcho = rpc.NewMethod("afxdp.test.Echo")
	methodFail = rpc.NewMethod("afxdp.test.Fail")
)

// echoHandler answers with the request's metadata and tensors, which stay
// valid until the response is sent.
func echoHandler(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
	resp.Meta = append(resp.Meta, req.Meta...)
	for _, t := range req.Tensors {
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: t.DType, Shape: t.Shape, Data: t.Data})
	}
	return nil
}

// serveRPC runs an rpc.Server on srv and returns a client of it dialing
// from cli; both stop at the end of the test.
func serveRPC(t testing.TB, srv, cli afxdprpc.Network) *rpc.Client {
	t.Helper()
	s := rpc.NewServer()
	s.Register(methodEcho, echoHandler, rpc.HandlerOptions{Inline: true})
	s.Register(methodSink, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error { return nil }, rpc.HandlerOptions{Inline: true})
	s.Register(methodFail, func(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
		return rpc.Errorf(wire.NotFound, "nothing called %q", req.Meta)
	}, rpc.HandlerOptions{})
	l, err := afxdprpc.Transport(srv).Listen("")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	c := rpc.NewClient(srv.Addr().String(), rpc.ClientOptions{Transport: afxdprpc.Transport(cli)})
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return c
}

// checkRPC makes sequential and concurrent calls, an error call and a call
// carrying a tensor of size bytes, checking every answer.
func checkRPC(t testing.TB, c *rpc.Client, calls, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var reply rpc.Reply
	for i := range calls {
		meta := fmt.Appendf(nil, "call %d", i)
		if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: meta}, &reply); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if !bytes.Equal(reply.Meta, meta) {
			t.Fatalf("call %d answered %q", i, reply.Meta)
		}
	}
	reply.Release()
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r rpc.Reply
			defer r.Release()
			for i := range calls / 32 {
				meta := fmt.Appendf(nil, "g%d-%d", g, i)
				if err := c.Call(ctx, methodEcho, &rpc.Request{Meta: meta}, &r); err != nil {
					errc <- err
					return
				}
				if !bytes.Equal(r.Meta, meta) {
					errc <- fmt.Errorf("%s answered %q", meta, r.Meta)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	err := c.Call(ctx, methodFail, &rpc.Request{Meta: []byte("x")}, &reply)
	if !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("failing call returned %v", err)
	}
	if size > 0 {
		data := pattern(size, 9)
		req := &rpc.Request{Meta: []byte("big"), Tensors: []wire.Tensor{{DType: wire.DTInt8, Shape: []int64{int64(size)}, Data: data}}}
		// The answer lands in memory the caller chose.
		dst := make([]byte, size)
		reply.Alloc = func(in *wire.Inbound) error {
			in.Tensors[0].Data = dst
			return nil
		}
		start := time.Now()
		if err := c.Call(ctx, methodEcho, req, &reply); err != nil {
			t.Fatalf("tensor call: %v", err)
		}
		t.Logf("%d MiB echoed in %v", size>>20, time.Since(start))
		if len(reply.Tensors) != 1 || &reply.Tensors[0].Data[0] != &dst[0] || !bytes.Equal(dst, data) {
			t.Fatal("echoed tensor differs or did not land where Alloc said")
		}
		reply.Release()
	}
}

// envOptions are the options of reactor index of a task of job, as the
// environment (rpc/cluster) asks, as the command makes them.
func envOptions(job string, index int) afxdp.Options {
	busy, set := cluster.PacketPolling(job)
	return afxdp.TaskOptions(busy, set, cluster.PinPacketReactors(job), index)
}
