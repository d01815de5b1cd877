package handlers

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestOpErrorAbortsOtherPartition fails a node on the worker: the ps,
// waiting in RecvTensor for a tensor the failed node would have produced,
// gets the worker's error at once instead of waiting for its deadline.
func TestOpErrorAbortsOtherPartition(t *testing.T) {
	c := newCluster(t, Options{})
	ctx := testCtx(t)
	f := wire.DTFloat
	psDev, wkDev, wkInc := c.ps.w.Device(), c.worker.w.Device(), c.worker.w.Incarnation()
	wkReg, err := c.worker.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		ConstF32("x", []int64{2}, 1, 2),
		ConstI32("idx", []int64{1}, 5),
		ConstI32("axis", nil, 0),
		NodeDef("bad_gather", "GatherV2", In("x", "idx", "axis"), Attrs("Tparams", f, "Tindices", wire.DTInt32, "Taxis", wire.DTInt32)),
		SendNode("g/_send", "bad_gather", "g:0", f, wkDev, wkInc, psDev),
	)})
	if err != nil {
		t.Fatal(err)
	}
	psReg, err := c.ps.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		RecvNode("g", "g:0", f, wkDev, wkInc, psDev),
		NodeDef("use", "Neg", In("g"), Attrs("T", f)),
	)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	psErr := make(chan error, 1)
	go func() {
		var out Fetched
		defer out.Release()
		err := c.ps.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: psReg.GraphHandle, StepId: 42}, nil, &out)
		psErr <- err
	}()
	// Fail the worker's step only once the ps's RecvTensor waits in the
	// worker's rendezvous, so that the abort has a waiter to reach.
	testwait.Eventually(t, Settle, func() bool { _, keys := c.worker.w.Rendezvous().Len(); return keys == 1 }, "the ps's RecvTensor to wait")
	var out Fetched
	defer out.Release()
	wkErr := c.worker.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: wkReg.GraphHandle, StepId: 42}, nil, &out)
	if !errors.Is(wkErr, status.ErrInvalidArgument) || !strings.Contains(wkErr.Error(), `node "bad_gather"`) {
		t.Fatalf("worker: %v", wkErr)
	}
	select {
	case err := <-psErr:
		if !strings.Contains(err.Error(), `node "bad_gather"`) || !strings.Contains(err.Error(), `node "g" (_Recv)`) {
			t.Fatalf("ps: %v, want the worker's error through its _Recv", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ps still waiting after the worker's step failed")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("abort took %v", d)
	}
	for _, task := range []*testTask{c.ps, c.worker} {
		task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: 42})
		if steps, keys := task.w.Rendezvous().Len(); steps != 0 || keys != 0 {
			t.Fatalf("%s: %d steps, %d keys after cleanup", task.w.Task(), steps, keys)
		}
	}
}

// TestCleanupGraphStopsWaitingStep cleans a step up while its _Recv waits
// for a tensor that will never come: RunGraph returns Aborted.
func TestCleanupGraphStopsWaitingStep(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	dev, inc := task.w.Device(), task.w.Incarnation()
	reg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		RecvNode("r", "never:0", wire.DTFloat, dev, inc, dev),
	)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var out Fetched
		defer out.Release()
		err := task.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 5, RecvKey: []string{"r"}}, nil, &out)
		done <- err
	}()
	testwait.Eventually(t, Settle, func() bool { _, keys := task.w.Rendezvous().Len(); return keys == 1 }, "the _Recv to wait")
	if err := task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: 5}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, status.ErrAborted) {
			t.Fatalf("RunGraph after CleanupGraph: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunGraph still waiting after CleanupGraph")
	}
	if steps, keys := task.w.Rendezvous().Len(); steps != 0 || keys != 0 {
		t.Fatalf("%d steps, %d keys after cleanup", steps, keys)
	}
}

// TestFedTensorOutlivesCall feeds a tensor that the worker only sends on to
// the ps: the ps pulls it after the worker's RunGraph has returned and
// other calls have reused the connection's buffers, and must still see the
// fed shape and values.
func TestFedTensorOutlivesCall(t *testing.T) {
	c := newCluster(t, Options{})
	ctx := testCtx(t)
	f := wire.DTFloat
	psDev, wkDev, wkInc := c.ps.w.Device(), c.worker.w.Device(), c.worker.w.Incarnation()
	wkReg, err := c.worker.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		FeedNode("x", "x:0", f, wkDev),
		SendNode("x/_send", "x", "x:0", f, wkDev, wkInc, psDev),
	)})
	if err != nil {
		t.Fatal(err)
	}
	psReg, err := c.ps.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		RecvNode("x", "x:0", f, wkDev, wkInc, psDev),
		NodeDef("y", "Identity", In("x"), Attrs("T", f)),
	)})
	if err != nil {
		t.Fatal(err)
	}
	xKey := FeedKey("x:0", wkDev)
	for step := int64(300); step < 310; step++ {
		x := F32([]int64{2, 3}, 1, 2, 3, 4, 5, float32(step))
		var out Fetched
		if err := c.worker.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: wkReg.GraphHandle, StepId: step},
			[]Feed{{Key: xKey, Tensor: x}}, &out); err != nil {
			t.Fatal(err)
		}
		out.Release()
		x.Buf.Release()
		// Another call on the same connection, with shapes of its own.
		other := F32([]int64{7, 1, 1}, 9, 9, 9, 9, 9, 9, 9)
		if err := c.worker.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: wkReg.GraphHandle, StepId: step + 1000},
			[]Feed{{Key: xKey, Tensor: other}}, &out); err != nil {
			t.Fatal(err)
		}
		out.Release()
		other.Buf.Release()
		if err := c.ps.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: psReg.GraphHandle, StepId: step, RecvKey: []string{"y"}}, nil, &out); err != nil {
			t.Fatal(err)
		}
		y := out.Tensors[0]
		if !slices.Equal(y.Shape, []int64{2, 3}) || !ApproxEqual(Floats(&y), []float32{1, 2, 3, 4, 5, float32(step)}) {
			t.Fatalf("step %d: ps received %v%v", step, y.Shape, Floats(&y))
		}
		out.Release()
		for _, task := range []*testTask{c.ps, c.worker} {
			task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
			task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step + 1000})
		}
	}
}
