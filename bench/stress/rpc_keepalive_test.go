package stress_test

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

// TestStressKeepaliveStoppedPeer stops the server process (SIGSTOP: its
// sockets stay open, nothing reads or answers) while one call waits for an
// answer and others push 16 MiB requests the server never reads. Keepalive
// must fail the connection, and every call with Unavailable, within the
// configured time of the connection's last sign of life; once the server
// runs again, calls go through on a new connection.
//
// The last sign of life is not the stop: the kernels on both sides take in
// the first megabytes of the requests sent after it, and keepalive counts
// bytes leaving as the peer reading (a peer reading a long frame cannot
// answer a ping queued behind it). A tick that sees them delays the ping by
// one period, so the bound is 2×Time+Timeout from when the last request was
// handed to the client. It is not counted from the stop, since on a loaded
// machine the callers may start seconds later.
func TestStressKeepaliveStoppedPeer(t *testing.T) {
	// Beside the attacks: a server process of its own, and a bound that
	// grows with the lateness they add to this one.
	t.Parallel()
	p := startStressServer(t)
	ka := rpc.Keepalive{Time: 200 * time.Millisecond, Timeout: 500 * time.Millisecond}
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: &tcp.Transport{}, Keepalive: ka})
	defer c.Close()
	request := func(op stress.Op, size int) *rpc.Request {
		req := &rpc.Request{Meta: stress.Args{Seed: 1, N: uint64(10 * time.Second)}.Append(nil)}
		if op == stress.OpEcho {
			data := make([]byte, size)
			req.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(size)}, Data: data}}
		}
		return req
	}
	call := func(ctx context.Context, op stress.Op, req *rpc.Request) error {
		var r rpc.Reply
		err := c.Call(ctx, op.Method(), req, &r)
		r.Release()
		return err
	}
	if err := call(context.Background(), stress.OpEcho, request(stress.OpEcho, 1)); err != nil {
		t.Fatal(err)
	}
	// The calls' own deadlines are far away: only keepalive can end them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type outcome struct {
		op         stress.Op
		err        error
		issued, at time.Time
	}
	out := make(chan outcome, 8)
	var wg sync.WaitGroup
	start := func(op stress.Op, req *rpc.Request) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			issued := time.Now()
			err := call(ctx, op, req)
			out <- outcome{op, err, issued, time.Now()}
		}()
	}
	// The 64 MiB of requests are made before the stop: making them is the
	// test's own work, not the connection's.
	var big []*rpc.Request
	for range 4 {
		big = append(big, request(stress.OpEcho, 16<<20))
	}
	start(stress.OpSleep, request(stress.OpSleep, 0))
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for _, req := range big {
		start(stress.OpEcho, req)
	}
	// What the machine adds by running either process late is not
	// keepalive's: the bound grows by a few wake-ups' worth of the
	// lateness measured meanwhile. A call that outlives its own deadline
	// (30s) is hung whatever the machine.
	lateness := stress.WatchLate()
	bound := 2*ka.Time + ka.Timeout + 500*time.Millisecond
	hang := time.NewTimer(25 * time.Second)
	defer hang.Stop()
	var ended []outcome
	for range 5 {
		select {
		case o := <-out:
			ended = append(ended, o)
		case <-hang.C:
			dumpBoth(t, p)
			cancel()
			wg.Wait()
			t.Fatalf("calls still waiting 25s after the server stopped (keepalive's bound %v)", bound)
		}
	}
	wg.Wait()
	late := lateness()
	bound += 3 * late
	// Until the last call started, the test itself kept the connection
	// moving.
	from := stopped
	for _, o := range ended {
		if o.issued.After(from) {
			from = o.issued
		}
	}
	for _, o := range ended {
		took := o.at.Sub(from)
		switch {
		case !errors.Is(o.err, rpc.ErrUnavailable):
			t.Errorf("%v call ended %v after the stop with %v, want unavailable", o.op, o.at.Sub(stopped), o.err)
		case took > bound:
			t.Errorf("%v call failed %v after the last call started (%v after the stop), over %v", o.op, took, o.at.Sub(stopped), bound)
		default:
			t.Logf("%v call failed %v after the last call started (%v after the stop): %v", o.op, took, o.at.Sub(stopped), o.err)
		}
	}
	t.Logf("bound %v: 2×Time+Timeout+500ms and 3× the %v this process woke goroutines late", bound, late)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if err := call(rctx, stress.OpEcho, request(stress.OpEcho, 1<<20)); err != nil {
		t.Fatalf("after the server ran again: %v", err)
	}
}
