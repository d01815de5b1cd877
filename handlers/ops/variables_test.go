package ops_test

import (
	"context"
	"sync"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestConcurrentSparseUpdatesAddUp runs scatter-adds of overlapping rows,
// with duplicate indices, from many steps at once, interleaved with dense
// reads and gathers; every update must land exactly.
func TestConcurrentSparseUpdatesAddUp(t *testing.T) {
	env := NewEnv(t)
	f, i32 := wire.DTFloat, wire.DTInt32
	if _, err := Run(t, env, GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{4, 2})),
		ConstF32("z", []int64{4, 2}),
		NodeDef("init", "AssignVariableOp", In("v", "z"), Attrs("dtype", f)),
	), nil); err != nil {
		t.Fatal(err)
	}
	g, err := graph.Build(GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{4, 2})),
		ConstI32("ids", []int64{3}, 0, 0, 3),
		ConstF32("ones", []int64{3, 2}, 1),
		NodeDef("add", "ResourceScatterAdd", In("v", "ids", "ones"), Attrs("dtype", f, "Tindices", i32)),
		NodeDef("read", "ReadVariableOp", In("v"), Attrs("dtype", f)),
		NodeDef("gather", "ResourceGather", In("v", "ids"), Attrs("dtype", f, "Tindices", i32)),
	), env)
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
			out, _, err := g.Run(context.Background(), &tfpb.RunGraphRequest{StepId: int64(s), RecvKey: []string{"read", "gather"}}, nil, false)
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
	out, err := Run(t, env, GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{4, 2})),
		NodeDef("read", "ReadVariableOp", In("v"), Attrs("dtype", f)),
	), nil, "read")
	if err != nil {
		t.Fatal(err)
	}
	got := out[0]
	want := []float32{2 * steps, 2 * steps, 0, 0, 0, 0, steps, steps}
	if !ApproxEqual(Floats(&got), want) {
		t.Fatalf("v = %v, want %v", Floats(&got), want)
	}
}

// TestRefVariables covers VariableV2 with Assign and ApplyGradientDescent,
// read through Identity as graphs of that era do.
func TestRefVariables(t *testing.T) {
	env := NewEnv(t)
	f := wire.DTFloat
	g := GraphDef(
		NodeDef("v", "VariableV2", nil, Attrs("dtype", f, "shape", []int64{2})),
		ConstF32("init_val", []int64{2}, 1, 2),
		NodeDef("init", "Assign", In("v", "init_val"), Attrs("T", f)),
		ConstF32("alpha", nil, 0.5),
		ConstF32("delta", []int64{2}, 2, 4),
		NodeDef("apply", "ApplyGradientDescent", In("v", "alpha", "delta", "^init"), Attrs("T", f)),
		NodeDef("read", "Identity", In("apply"), Attrs("T", f)),
	)
	out, err := Run(t, env, g, nil, "read", "v")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{0, 0}) {
		t.Fatalf("read = %v", got)
	}
	if got := Floats(&out[1]); !ApproxEqual(got, []float32{0, 0}) {
		t.Fatalf("fetch of the ref = %v", got)
	}
	// Assign with validate_shape refuses a new shape.
	_, err = Run(t, env, GraphDef(
		NodeDef("v", "VariableV2", nil, Attrs("dtype", f, "shape", []int64{2})),
		ConstF32("val", []int64{3}, 1, 2, 3),
		NodeDef("a", "Assign", In("v", "val"), Attrs("T", f)),
	), nil, "a")
	if err == nil {
		t.Fatal("Assign of a new shape succeeded")
	}
	// AssignAddVariableOp and CleanupAll.
	out, err = Run(t, env, GraphDef(
		NodeDef("h", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2}, "container", "c1")),
		ConstF32("one", []int64{2}, 1),
		NodeDef("init", "AssignVariableOp", In("h", "one"), Attrs("dtype", f)),
		NodeDef("add", "AssignAddVariableOp", In("h", "one", "^init"), Attrs("dtype", f)),
		NodeDef("read", "ReadVariableOp", In("h", "^add"), Attrs("dtype", f)),
	), nil, "read")
	if err != nil || !ApproxEqual(Floats(&out[0]), []float32{2, 2}) {
		t.Fatalf("AssignAdd: %v, %v", out, err)
	}
	env.Vars.Cleanup([]string{"c1"})
	if _, err := Run(t, env, GraphDef(
		NodeDef("h", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2}, "container", "c1")),
		NodeDef("read", "ReadVariableOp", In("h"), Attrs("dtype", f)),
	), nil, "read"); err == nil {
		t.Fatal("variable survived CleanupAll of its container")
	}
}
