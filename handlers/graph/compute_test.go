package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/compute"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// runAsync runs g on env on a goroutine and returns where its first
// fetched value (or error) arrives.
func runAsync(t *testing.T, env *ops.Env, g *tfpb.GraphDef, fetch string) <-chan result {
	t.Helper()
	res := make(chan result, 1)
	go func() {
		out, err := Run(t, env, g, nil, fetch)
		r := result{err: err}
		if err == nil {
			r.vals = Floats(&out[0])
		}
		res <- r
	}()
	return res
}

type result struct {
	vals []float32
	err  error
}

// await returns r's result, failing the test if none comes in 10s: a
// step that waits for a token nobody gives back never ends.
func await(t *testing.T, r <-chan result, what string) result {
	t.Helper()
	select {
	case got := <-r:
		return got
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no result in 10s", what)
		return result{}
	}
}

// TestKernelsTakeComputeTokens: a step's kernels wait for a token of the
// task's compute limit, and run once they get one.
func TestKernelsTakeComputeTokens(t *testing.T) {
	env := NewEnv(t)
	env.Compute = compute.New(1)
	env.Compute.Acquire()
	res := runAsync(t, env, GraphDef(ConstF32("a", nil, 2), NodeDef("n", "Neg", In("a"), Attrs("T", wire.DTFloat))), "n")
	testwait.Eventually(t, Settle, func() bool { return env.Compute.Waiting() == 1 }, "a kernel to wait for the token")
	select {
	case <-res:
		t.Fatal("the step ended while the only token was held elsewhere")
	default:
	}
	env.Compute.Release()
	if r := await(t, res, "step"); r.err != nil || len(r.vals) != 1 || r.vals[0] != -2 {
		t.Fatalf("got %v, %v; want [-2]", r.vals, r.err)
	}
	if env.Compute.Held() != 0 {
		t.Fatalf("%d tokens held after the step", env.Compute.Held())
	}
}

// TestSendAndRecvTakeNoToken: a step that only passes a feed on to a fetch
// (a _Recv and a _Send, which may wait for or write to the network) runs
// while every token is held.
func TestSendAndRecvTakeNoToken(t *testing.T) {
	env := NewEnv(t)
	env.Compute = compute.New(1)
	env.Compute.Acquire()
	defer env.Compute.Release()
	g := GraphDef(FeedNode("x", "x", wire.DTFloat, Device), FetchNode("y", "x", "y", wire.DTFloat, Device, Incarnation))
	res := make(chan error, 1)
	go func() {
		_, err := Run(t, env, g, map[string]wire.Tensor{FeedKey("x", Device): F32(nil, 3)}, FetchKey("y", Device, Incarnation))
		res <- err
	}()
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a step of _Recv and _Send waited for a compute token")
	}
}

// TestRemoteRecvHoldsNoToken: while a step waits for a remote tensor it
// holds no token, so that the task computing that tensor, sharing the
// limit, gets one: with one token, a receiver that kept it would wait
// forever for a sender that cannot compute.
func TestRemoteRecvHoldsNoToken(t *testing.T) {
	limit := compute.New(1)
	const worker = "/job:worker/replica:0/task:0/device:CPU:0"
	sender := NewEnv(t)
	sender.Compute = limit
	env := NewEnv(t)
	env.Compute = limit
	env.RemoteRecv = func(ctx context.Context, task string, step int64, key string) (wire.Tensor, error) {
		// The executor may still be finishing the kernel before this
		// _Recv when the _Recv starts; once it has nothing else to run
		// it must give the token back rather than keep it while waiting.
		if !tokensGiveBack(limit, 5*time.Second) {
			t.Errorf("%d tokens held while the step waits for a remote tensor", limit.Held())
			return wire.Tensor{}, context.DeadlineExceeded
		}
		// The sending task's step computes the tensor, taking the token.
		out, err := Run(t, sender, GraphDef(ConstF32("c", nil, 5), NodeDef("m", "Neg", In("c"), Attrs("T", wire.DTFloat))), nil, "m")
		if err != nil {
			return wire.Tensor{}, err
		}
		return tensor.Copy(&out[0]), nil
	}
	r := RecvNode("r", "t", wire.DTFloat, worker, 1, Device)
	r.Input = In("^b")
	g := GraphDef(
		ConstF32("a", nil, 1),
		NodeDef("b", "Neg", In("a"), Attrs("T", wire.DTFloat)),
		r,
		NodeDef("sum", "Add", In("b", "r"), Attrs("T", wire.DTFloat)),
	)
	got := await(t, runAsync(t, env, g, "sum"), "a step whose remote tensor another step computes")
	if got.err != nil || len(got.vals) != 1 || got.vals[0] != -6 {
		t.Fatalf("got %v, %v; want [-6]", got.vals, got.err)
	}
}

// tokensGiveBack reports whether every token of l is given back within
// d. It does not call t.Fatal, because its callers run on a step's
// goroutines.
func tokensGiveBack(l *compute.Limit, d time.Duration) bool {
	return testwait.Until(d, func() bool { return l.Held() == 0 })
}
