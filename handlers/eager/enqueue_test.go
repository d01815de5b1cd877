package eager

import (
	"context"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

const device = testTask + "/device:CPU:0"

func operation(id int64, name string, attrs map[string]*tfpb.AttrValue, in ...*tfpb.Operation_Input) *tfpb.QueueItem {
	return &tfpb.QueueItem{Item: &tfpb.QueueItem_Operation{Operation: &tfpb.Operation{Id: id, Name: name, Attrs: attrs, OpInputs: in, Device: device}}}
}

func remote(op int64, out int32) *tfpb.Operation_Input {
	return &tfpb.Operation_Input{Item: &tfpb.Operation_Input_RemoteHandle{RemoteHandle: &tfpb.RemoteTensorHandle{OpId: op, OutputNum: out, Device: device}}}
}

func floats(shape []int64, vals ...float32) *tfpb.TensorProto {
	return &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: tensor.ShapeToProto(shape), FloatVal: vals}
}

func inline(p *tfpb.TensorProto) *tfpb.Operation_Input {
	return &tfpb.Operation_Input{Item: &tfpb.Operation_Input_Tensor{Tensor: p}}
}

func enqueue(s *Service, ctxID uint64, items ...*tfpb.QueueItem) (*tfpb.EnqueueResponse, error) {
	return s.Enqueue(context.Background(), &tfpb.EnqueueRequest{ContextId: ctxID, Queue: items})
}

func mustEnqueue(t *testing.T, s *Service, ctxID uint64, items ...*tfpb.QueueItem) *tfpb.EnqueueResponse {
	t.Helper()
	resp, err := enqueue(s, ctxID, items...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return resp
}

// varHandle is an eager VarHandleOp as TensorFlow 2 sends it: anonymous
// unless named.
func varHandle(id int64, shape []int64, name string) *tfpb.QueueItem {
	if name == "" {
		name = anonymousName
	}
	return operation(id, "VarHandleOp", Attrs("dtype", wire.DTFloat, "shape", shape, "shared_name", name, "container", ""))
}

// makeVariable makes an anonymous variable as op id of context ctxID,
// holding vals.
func makeVariable(t *testing.T, s *Service, ctxID uint64, id int64, vals []float32) {
	t.Helper()
	shape := []int64{int64(len(vals))}
	mustEnqueue(t, s, ctxID, varHandle(id, shape, ""),
		operation(id+1000, "AssignVariableOp", Attrs("dtype", wire.DTFloat), remote(id, 0), inline(floats(shape, vals...))))
}

// readVariable reads the variable of handle (op, 0), answered as a tensor
// (the invalid op id).
func readVariable(t *testing.T, s *Service, ctxID uint64, op int64) []float32 {
	t.Helper()
	resp := mustEnqueue(t, s, ctxID, operation(invalidOpID, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(op, 0)))
	return protoFloats(t, resp.GetQueueResponse()[0].GetTensor()[0])
}

func protoFloats(t *testing.T, p *tfpb.TensorProto) []float32 {
	t.Helper()
	x, err := tensor.FromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Buf.Release()
	return Floats(&x)
}

// TestEagerVariable makes, updates and reads an anonymous variable as a
// coordinator does, and drops it with its handle.
func TestEagerVariable(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	resp := mustEnqueue(t, s, 1, varHandle(1, []int64{2}, ""))
	if sh := resp.GetQueueResponse()[0].GetShape(); len(sh) != 1 || len(sh[0].GetDim()) != 0 {
		t.Fatalf("VarHandleOp answered shapes %v, want one scalar", sh)
	}
	mustEnqueue(t, s, 1,
		operation(2, "AssignVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0), inline(floats([]int64{2}, 1, 2))),
		operation(3, "AssignAddVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0), inline(floats([]int64{2}, 10))))
	resp = mustEnqueue(t, s, 1, operation(4, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0)))
	if sh := resp.GetQueueResponse()[0].GetShape(); len(sh) != 1 || len(sh[0].GetDim()) != 1 || sh[0].GetDim()[0].GetSize() != 2 {
		t.Fatalf("ReadVariableOp answered shapes %v, want [2]", sh)
	}
	// The read's output stays on the task as (4, 0).
	got := mustEnqueue(t, s, 1, operation(invalidOpID, "Identity", Attrs("T", wire.DTFloat), remote(4, 0)))
	if v := protoFloats(t, got.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{11, 12}) {
		t.Fatalf("read %v, want [11 12]", v)
	}
	if s.opts.Env.Vars.Len() != 1 {
		t.Fatal("no variable made")
	}
	mustEnqueue(t, s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_HandleToDecref{HandleToDecref: &tfpb.RemoteTensorHandle{OpId: 1}}})
	if n := s.opts.Env.Vars.Len(); n != 0 {
		t.Fatalf("%d variables after the last handle was released", n)
	}
	_, err := enqueue(s, 1, operation(5, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0)))
	wantCode(t, "read through a released handle", err, wire.InvalidArgument, "Op ID: 1, Output num: 0")
}

// TestEagerVariablesAreTheGraphs checks that a named variable an eager op
// makes is the one a graph's VarHandleOp of that name reaches.
func TestEagerVariablesAreTheGraphs(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	mustEnqueue(t, s, 1, varHandle(1, []int64{2}, "w"),
		operation(2, "AssignVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0), inline(floats([]int64{2}, 3, 4))))
	out, err := Run(t, s.opts.Env, GraphDef(
		NodeDef("h", "VarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{2}, "shared_name", "w")),
		ConstF32("one", []int64{2}, 1),
		NodeDef("add", "AssignAddVariableOp", In("h", "one"), Attrs("dtype", wire.DTFloat)),
		NodeDef("read", "ReadVariableOp", In("h", "^add"), Attrs("dtype", wire.DTFloat)),
	), nil, "read")
	if err != nil || !ApproxEqual(Floats(&out[0]), []float32{4, 5}) {
		t.Fatalf("graph read %v, %v; want [4 5]", out, err)
	}
	if v := readVariable(t, s, 1, 1); !ApproxEqual(v, []float32{4, 5}) {
		t.Fatalf("eager read %v after the graph's update, want [4 5]", v)
	}
}

// TestSendTensor keeps a SendTensorOp's tensors as (op_id, i) for the
// operations that follow.
func TestSendTensor(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	mustEnqueue(t, s, 1, &tfpb.QueueItem{Item: &tfpb.QueueItem_SendTensor{SendTensor: &tfpb.SendTensorOp{
		OpId: 5, DeviceName: device, Tensors: []*tfpb.TensorProto{floats([]int64{2}, 1, 2), floats([]int64{2}, 3, 4)}}}})
	resp := mustEnqueue(t, s, 1, operation(invalidOpID, "Mul", Attrs("T", wire.DTFloat), remote(5, 0), remote(5, 1)))
	if v := protoFloats(t, resp.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{3, 8}) {
		t.Fatalf("Mul of the sent tensors: %v, want [3 8]", v)
	}
}

// TestBadOperations answers each malformed item with an error naming what
// was wrong; the items after it do not run, and the task goes on serving.
func TestBadOperations(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	create(t, s, 2, 0, 0)
	makeVariable(t, s, 1, 1, []float32{1, 2})
	for _, tc := range []struct {
		what  string
		item  *tfpb.QueueItem
		code  wire.Code
		words []string
	}{
		{"unknown op", operation(10, "NoSuchOp", nil), wire.NotFound, []string{"Op type not registered 'NoSuchOp'"}},
		{"unknown handle", operation(10, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(99, 0)), wire.InvalidArgument, []string{"Op ID: 99"}},
		{"attr of the wrong type", operation(10, "ReadVariableOp", Attrs("dtype", "float"), remote(1, 0)), wire.InvalidArgument, []string{"ReadVariableOp", "dtype"}},
		{"missing attr", operation(10, "ReadVariableOp", nil, remote(1, 0)), wire.InvalidArgument, []string{"dtype"}},
		{"wrong input count", operation(10, "ReadVariableOp", Attrs("dtype", wire.DTFloat)), wire.InvalidArgument, []string{"operation 10 (ReadVariableOp)"}},
		{"empty input", operation(10, "Identity", Attrs("T", wire.DTFloat), &tfpb.Operation_Input{}), wire.InvalidArgument, []string{"input 0"}},
		{"malformed tensor", operation(10, "Identity", Attrs("T", wire.DTFloat), inline(&tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: tensor.ShapeToProto([]int64{2}), TensorContent: []byte{1, 2, 3}})), wire.InvalidArgument, []string{"Invalid TensorProto"}},
		{"another task's device", &tfpb.QueueItem{Item: &tfpb.QueueItem_Operation{Operation: &tfpb.Operation{Id: 10, Name: "NoOp", Device: "/job:worker/replica:0/task:0/device:CPU:0"}}}, wire.InvalidArgument, []string{"not on " + testTask}},
		{"read of a variable of the wrong dtype", operation(10, "ReadVariableOp", Attrs("dtype", wire.DTInt32), remote(1, 0)), wire.InvalidArgument, []string{"holds float"}},
		{"empty item", &tfpb.QueueItem{}, wire.InvalidArgument, []string{"empty queue item"}},
		{"packed handle", &tfpb.QueueItem{Item: &tfpb.QueueItem_SendPackedHandle{SendPackedHandle: &tfpb.SendPackedHandleOp{OpId: 10}}}, wire.Unimplemented, []string{"SendPackedHandleOp"}},
		{"unknown function removed", &tfpb.QueueItem{Item: &tfpb.QueueItem_RemoveFunction{RemoveFunction: &tfpb.RemoveFunctionOp{FunctionName: "f"}}}, wire.InvalidArgument, []string{"'f'"}},
	} {
		// The item after the bad one must not run.
		after := operation(11, "AssignVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0), inline(floats([]int64{2}, 7, 7)))
		_, err := enqueue(s, 1, tc.item, after)
		wantCode(t, tc.what, err, tc.code, tc.words...)
		if v := readVariable(t, s, 1, 1); !ApproxEqual(v, []float32{1, 2}) {
			t.Fatalf("%s: the item after the failure ran: variable %v", tc.what, v)
		}
	}
	makeVariable(t, s, 2, 1, []float32{5})
	if v := readVariable(t, s, 2, 1); !ApproxEqual(v, []float32{5}) {
		t.Fatalf("another context after the failures: %v", v)
	}
}

// TestCloseContextDropsWhatItMade checks that nothing a context made
// outlives it: its variables and its tensors.
func TestCloseContextDropsWhatItMade(t *testing.T) {
	s := newTestService(t, Options{})
	create(t, s, 1, 0, 0)
	makeVariable(t, s, 1, 1, []float32{1, 2, 3})
	makeVariable(t, s, 1, 2, []float32{4})
	mustEnqueue(t, s, 1, operation(3, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0)))
	if _, err := s.CloseContext(context.Background(), &tfpb.CloseContextRequest{ContextId: 1}); err != nil {
		t.Fatal(err)
	}
	if n := s.opts.Env.Vars.Len(); n != 0 {
		t.Fatalf("%d variables outlived their context", n)
	}
	_, err := enqueue(s, 1, operation(4, "Identity", Attrs("T", wire.DTFloat), remote(3, 0)))
	wantCode(t, "Enqueue on the closed context", err, wire.Aborted)
}
