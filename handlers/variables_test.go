package handlers

import (
	"context"
	"sync"
	"testing"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestConcurrentSparseUpdatesAddUp runs scatter-adds of overlapping rows,
// with duplicate indices, from many steps at once, interleaved with dense
// reads and gathers; every update must land exactly.
func TestConcurrentSparseUpdatesAddUp(t *testing.T) {
	w := newTestWorker(t)
	f, i32 := wire.DTFloat, wire.DTInt32
	if _, err := runLocal(t, w, graphDef(
		nodeDef("v", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{4, 2})),
		constF32("z", []int64{4, 2}),
		nodeDef("init", "AssignVariableOp", in("v", "z"), attrs("dtype", f)),
	), nil); err != nil {
		t.Fatal(err)
	}
	reg, err := w.registerGraph(&tfpb.RegisterGraphRequest{GraphDef: graphDef(
		nodeDef("v", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{4, 2})),
		constI32("ids", []int64{3}, 0, 0, 3),
		constF32("ones", []int64{3, 2}, 1),
		nodeDef("add", "ResourceScatterAdd", in("v", "ids", "ones"), attrs("dtype", f, "Tindices", i32)),
		nodeDef("read", "ReadVariableOp", in("v"), attrs("dtype", f)),
		nodeDef("gather", "ResourceGather", in("v", "ids"), attrs("dtype", f, "Tindices", i32)),
	)})
	if err != nil {
		t.Fatal(err)
	}
	const steps = 200
	var wg sync.WaitGroup
	errs := make(chan error, steps)
	for s := 0; s < steps; s++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, out, err := w.runGraph(context.Background(), &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: int64(s), RecvKey: []string{"read", "gather"}}, nil)
			for i := range out {
				out[i].Buf.Release()
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	v, err := w.vars.lookup("", "v", f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.read()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Buf.Release()
	want := []float32{2 * steps, 2 * steps, 0, 0, 0, 0, steps, steps}
	if !approxEqual(floatsOf(&got), want) {
		t.Fatalf("v = %v, want %v", floatsOf(&got), want)
	}
}

// TestRefVariables covers VariableV2 with Assign and ApplyGradientDescent,
// read through Identity as graphs of that era do.
func TestRefVariables(t *testing.T) {
	w := newTestWorker(t)
	f := wire.DTFloat
	g := graphDef(
		nodeDef("v", "VariableV2", nil, attrs("dtype", f, "shape", []int64{2})),
		constF32("init_val", []int64{2}, 1, 2),
		nodeDef("init", "Assign", in("v", "init_val"), attrs("T", f)),
		constF32("alpha", nil, 0.5),
		constF32("delta", []int64{2}, 2, 4),
		nodeDef("apply", "ApplyGradientDescent", in("v", "alpha", "delta", "^init"), attrs("T", f)),
		nodeDef("read", "Identity", in("apply"), attrs("T", f)),
	)
	out, err := runLocal(t, w, g, nil, "read", "v")
	if err != nil {
		t.Fatal(err)
	}
	if got := floatsOf(&out[0]); !approxEqual(got, []float32{0, 0}) {
		t.Fatalf("read = %v", got)
	}
	if got := floatsOf(&out[1]); !approxEqual(got, []float32{0, 0}) {
		t.Fatalf("fetch of the ref = %v", got)
	}
	// Assign with validate_shape refuses a new shape.
	_, err = runLocal(t, w, graphDef(
		nodeDef("v", "VariableV2", nil, attrs("dtype", f, "shape", []int64{2})),
		constF32("val", []int64{3}, 1, 2, 3),
		nodeDef("a", "Assign", in("v", "val"), attrs("T", f)),
	), nil, "a")
	if err == nil {
		t.Fatal("Assign of a new shape succeeded")
	}
	// AssignAddVariableOp and CleanupAll.
	out, err = runLocal(t, w, graphDef(
		nodeDef("h", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{2}, "container", "c1")),
		constF32("one", []int64{2}, 1),
		nodeDef("init", "AssignVariableOp", in("h", "one"), attrs("dtype", f)),
		nodeDef("add", "AssignAddVariableOp", in("h", "one", "^init"), attrs("dtype", f)),
		nodeDef("read", "ReadVariableOp", in("h", "^add"), attrs("dtype", f)),
	), nil, "read")
	if err != nil || !approxEqual(floatsOf(&out[0]), []float32{2, 2}) {
		t.Fatalf("AssignAdd: %v, %v", out, err)
	}
	w.cleanupAll(&tfpb.CleanupAllRequest{Container: []string{"c1"}})
	if _, err := runLocal(t, w, graphDef(
		nodeDef("h", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{2}, "container", "c1")),
		nodeDef("read", "ReadVariableOp", in("h"), attrs("dtype", f)),
	), nil, "read"); err == nil {
		t.Fatal("variable survived CleanupAll of its container")
	}
}
