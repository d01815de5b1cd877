package rpc_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestStressKeepaliveStoppedPeer stops the server process (SIGSTOP: its
// sockets stay open, nothing reads or answers) while one call waits for an
// answer and others push 16 MiB requests the server never reads. Keepalive
// must fail the connection, and every call with Unavailable, within the
// configured time; once the server runs again, calls go through on a new
// connection.
func TestStressKeepaliveStoppedPeer(t *testing.T) {
	p := startStressServer(t)
	ka := rpc.Keepalive{Time: 200 * time.Millisecond, Timeout: 500 * time.Millisecond}
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Keepalive: ka})
	defer c.Close()
	call := func(ctx context.Context, op stress.Op, size int) error {
		var req rpc.Request
		req.Meta = stress.Args{Seed: 1, N: uint64(10 * time.Second)}.Append(nil)
		if op == stress.OpEcho {
			data := make([]byte, size)
			req.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}
		}
		var r rpc.Reply
		err := c.Call(ctx, op.Method(), &req, &r)
		r.Release()
		return err
	}
	if err := call(context.Background(), stress.OpEcho, 1); err != nil {
		t.Fatal(err)
	}
	// The calls' own deadlines are far away: only keepalive can end them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type outcome struct {
		op  stress.Op
		err error
		at  time.Time
	}
	out := make(chan outcome, 8)
	var wg sync.WaitGroup
	start := func(op stress.Op, size int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := call(ctx, op, size)
			out <- outcome{op, err, time.Now()}
		}()
	}
	start(stress.OpSleep, 0)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for range 4 {
		start(stress.OpEcho, 16<<20)
	}
	bound := ka.Time + ka.Timeout + 500*time.Millisecond
	deadline := time.NewTimer(bound + 5*time.Second)
	defer deadline.Stop()
	for range 5 {
		select {
		case o := <-out:
			took := o.at.Sub(stopped)
			switch {
			case !errors.Is(o.err, rpc.ErrUnavailable):
				t.Errorf("%v call ended %v after the stop with %v, want unavailable", o.op, took, o.err)
			case took > bound:
				t.Errorf("%v call failed %v after the server stopped, over %v", o.op, took, bound)
			default:
				t.Logf("%v call failed %v after the stop: %v", o.op, took, o.err)
			}
		case <-deadline.C:
			dumpBoth(t, p)
			cancel()
			wg.Wait()
			t.Fatalf("calls still waiting %v after the server stopped", bound+5*time.Second)
		}
	}
	wg.Wait()
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := call(rctx, stress.OpEcho, 1<<20); err != nil {
		t.Fatalf("after the server ran again: %v", err)
	}
}
