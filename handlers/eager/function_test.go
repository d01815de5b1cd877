package eager

import (
	"context"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func arg(name string, dt tfpb.DataType) *tfpb.OpDef_ArgDef {
	return &tfpb.OpDef_ArgDef{Name: name, Type: dt}
}

// addOne is y = x + 1.
var addOne = &tfpb.FunctionDef{
	Signature: &tfpb.OpDef{Name: "add_one", InputArg: []*tfpb.OpDef_ArgDef{arg("x", tfpb.DataType_DT_FLOAT)}, OutputArg: []*tfpb.OpDef_ArgDef{arg("y", tfpb.DataType_DT_FLOAT)}},
	NodeDef: []*tfpb.NodeDef{
		ConstF32("one", nil, 1),
		NodeDef("add", "AddV2", In("x", "one:output:0"), Attrs("T", wire.DTFloat)),
	},
	Ret: map[string]string{"y": "add:z:0"},
}

// bump adds 1 to the variable v and returns its new value, as the ps part
// of a training step updates and reads a variable.
var bump = &tfpb.FunctionDef{
	Signature: &tfpb.OpDef{Name: "bump", InputArg: []*tfpb.OpDef_ArgDef{arg("v", tfpb.DataType_DT_RESOURCE)}, OutputArg: []*tfpb.OpDef_ArgDef{arg("value", tfpb.DataType_DT_FLOAT)}},
	NodeDef: []*tfpb.NodeDef{
		ConstF32("one", []int64{1}, 1),
		NodeDef("add", "AssignAddVariableOp", In("v", "one:output:0"), Attrs("dtype", wire.DTFloat)),
		NodeDef("read", "ReadVariableOp", In("v", "^add"), Attrs("dtype", wire.DTFloat)),
	},
	Ret: map[string]string{"value": "read:value:0"},
}

// loop calls itself.
var loop = &tfpb.FunctionDef{
	Signature: &tfpb.OpDef{Name: "loop", InputArg: []*tfpb.OpDef_ArgDef{arg("x", tfpb.DataType_DT_FLOAT)}, OutputArg: []*tfpb.OpDef_ArgDef{arg("y", tfpb.DataType_DT_FLOAT)}},
	NodeDef:   []*tfpb.NodeDef{NodeDef("again", "loop", In("x"), nil)},
	Ret:       map[string]string{"y": "again:y:0"},
}

func register(f *tfpb.FunctionDef, component bool) *tfpb.QueueItem {
	return &tfpb.QueueItem{Item: &tfpb.QueueItem_RegisterFunction{RegisterFunction: &tfpb.RegisterFunctionOp{FunctionDef: f, IsComponentFunction: component, Library: &tfpb.FunctionDefLibrary{}}}}
}

func callOp(id int64, name string, component bool, step int64, in ...*tfpb.Operation_Input) *tfpb.Operation {
	return &tfpb.Operation{Id: id, Name: name, OpInputs: in, Device: device, IsFunction: true, IsComponentFunction: component, FuncStepId: step}
}

// TestEnqueuedFunction runs a registered function as an operation: its
// output kept as a handle, with its shape and device, or answered as a
// tensor.
func TestEnqueuedFunction(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	mustEnqueue(t, s, 1, register(addOne, false))
	resp := mustEnqueue(t, s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_Operation{Operation: callOp(7, "add_one", false, 0, inline(floats([]int64{2}, 1, 2)))}})
	qr := resp.GetQueueResponse()[0]
	if len(qr.GetShape()) != 1 || len(qr.GetDevice()) != 1 || qr.GetDevice()[0] != device {
		t.Fatalf("function call answered %v, want one shape on %s", qr, device)
	}
	got := mustEnqueue(t, s, 1, operation(invalidOpID, "Identity", Attrs("T", wire.DTFloat), remote(7, 0)))
	if v := protoFloats(t, got.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{2, 3}) {
		t.Fatalf("add_one([1 2]) = %v", v)
	}
	// Registered again, as clients do: the function stays usable.
	mustEnqueue(t, s, 1, register(addOne, false))
	resp = mustEnqueue(t, s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_Operation{Operation: callOp(invalidOpID, "add_one", false, 0, inline(floats(nil, 5)))}})
	if v := protoFloats(t, resp.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{6}) {
		t.Fatalf("add_one(5) = %v", v)
	}
	mustEnqueue(t, s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_RemoveFunction{RemoveFunction: &tfpb.RemoveFunctionOp{FunctionName: "add_one"}}})
	_, err := enqueue(s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_Operation{Operation: callOp(8, "add_one", false, 0, inline(floats(nil, 5)))}})
	wantCode(t, "a removed function", err, wire.NotFound, "add_one")
}

// TestComponentFunctionUpdatesTheVariable runs a component function whose
// resource input is a variable an eager op made: its update is the
// variable's, step after step, and its output is kept under output_num.
func TestComponentFunctionUpdatesTheVariable(t *testing.T) {
	s := newTestService(t, Options{})
	ctx := context.Background()
	create(t, s, 1, 0, 0)
	makeVariable(t, s, 1, 1, []float32{10})
	mustEnqueue(t, s, 1, register(bump, true))
	for step := range int64(3) {
		resp, err := s.RunComponentFunction(ctx, &tfpb.RunComponentFunctionRequest{ContextId: 1, Operation: callOp(20+step, "bump", true, -100-step, remote(1, 0)), OutputNum: []int32{3}})
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if len(resp.GetShape()) != 1 || len(resp.GetTensor()) != 0 {
			t.Fatalf("step %d answered %v, want one shape", step, resp)
		}
		got := mustEnqueue(t, s, 1, operation(invalidOpID, "Identity", Attrs("T", wire.DTFloat), remote(20+step, 3)))
		if v := protoFloats(t, got.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{float32(11 + step)}) {
			t.Fatalf("step %d returned %v", step, v)
		}
	}
	if v := readVariable(t, s, 1, 1); !ApproxEqual(v, []float32{13}) {
		t.Fatalf("variable after three bumps: %v", v)
	}
	// The invalid op id answers the outputs as tensors.
	resp, err := s.RunComponentFunction(ctx, &tfpb.RunComponentFunctionRequest{ContextId: 1, Operation: callOp(invalidOpID, "bump", true, -200, remote(1, 0))})
	if err != nil || len(resp.GetTensor()) != 1 || !ApproxEqual(protoFloats(t, resp.GetTensor()[0]), []float32{14}) {
		t.Fatalf("bump answering tensors: %v, %v", resp, err)
	}
}

// TestFunctionErrors names what was wrong with a function call and goes on
// serving.
func TestFunctionErrors(t *testing.T) {
	s := newTestService(t, Options{})
	ctx := context.Background()
	create(t, s, 1, 0, 0)
	makeVariable(t, s, 1, 1, []float32{1})
	mustEnqueue(t, s, 1, register(bump, true), register(loop, true), register(addOne, true))
	run := func(op *tfpb.Operation) error {
		_, err := s.RunComponentFunction(ctx, &tfpb.RunComponentFunctionRequest{ContextId: 1, Operation: op})
		return err
	}
	wantCode(t, "a recursive function", run(callOp(5, "loop", true, -1, inline(floats(nil, 1)))), wire.InvalidArgument, "recursively")
	wantCode(t, "an unregistered component", run(callOp(5, "nothing", true, -1)), wire.Internal, "Could not find function library for registered component function: nothing")
	wantCode(t, "not a component function", run(callOp(5, "bump", false, -1, remote(1, 0))), wire.Internal, "can only be used to execute component functions")
	wantCode(t, "too few inputs", run(callOp(5, "bump", true, -1)), wire.InvalidArgument, "takes 1 inputs")
	wantCode(t, "a tensor for a resource", run(callOp(5, "add_one", true, -1, remote(1, 0))), wire.InvalidArgument)
	_, err := enqueue(s, 1, register(&tfpb.FunctionDef{Signature: &tfpb.OpDef{}}, false))
	wantCode(t, "a function without a name", err, wire.InvalidArgument, "no name")
	if err := run(callOp(6, "bump", true, -2, remote(1, 0))); err != nil {
		t.Fatalf("bump after the failures: %v", err)
	}
	if v := readVariable(t, s, 1, 1); !ApproxEqual(v, []float32{2}) {
		t.Fatalf("variable after one bump: %v", v)
	}
}
