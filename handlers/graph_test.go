package handlers

import (
	"errors"
	"strings"
	"testing"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestRegisterGraphRejects(t *testing.T) {
	f := wire.DTFloat
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		msg   string // the error must contain it
	}{
		{"unknown op", []*tfpb.NodeDef{nodeDef("conv", "Conv2D", nil, nil)}, `node "conv" (Conv2D): unknown op`},
		{"missing attr", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "Neg", in("a"), nil)}, `node "n" (Neg): missing attr "T"`},
		{"attr of wrong kind", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "Neg", in("a"), attrs("T", "float"))}, `node "n" (Neg): attr "T" is not a type`},
		{"unsupported dtype", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "Sigmoid", in("a"), attrs("T", wire.DTInt32))}, `node "n" (Sigmoid): attr "T" is int32`},
		{"no such input", []*tfpb.NodeDef{nodeDef("n", "Neg", in("ghost"), attrs("T", f))}, `node "n" (Neg): input "ghost": no such node`},
		{"bad output index", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "Neg", in("a:x"), attrs("T", f))}, `input "a:x": bad output index`},
		{"output out of range", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "Neg", in("a:1"), attrs("T", f))}, `node "n" (Neg): input a:1: Const has 1 outputs`},
		{"no such control input", []*tfpb.NodeDef{nodeDef("n", "NoOp", in("^ghost"), nil)}, `control input "^ghost"`},
		{"wrong input count", []*tfpb.NodeDef{constF32("a", nil, 1), nodeDef("n", "MatMul", in("a"), attrs("T", f))}, `node "n" (MatMul): has 1 data inputs, want 2`},
		{"duplicate name", []*tfpb.NodeDef{constF32("a", nil, 1), constF32("a", nil, 2)}, `node "a" (Const): duplicate node name`},
		{"cycle", []*tfpb.NodeDef{nodeDef("x", "Identity", in("y"), attrs("T", f)), nodeDef("y", "Identity", in("x"), attrs("T", f))}, "cycle"},
		{"const dtype mismatch", []*tfpb.NodeDef{nodeDef("c", "Const", nil, attrs("dtype", wire.DTInt32, "value", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT}))}, `node "c" (Const): value is float`},
		{"const too many values", []*tfpb.NodeDef{constF32("c", []int64{1}, 1, 2)}, `node "c" (Const)`},
		{"bad send device", []*tfpb.NodeDef{constF32("a", nil, 1), sendNode("s", "a", "t", f, "/job:ps/replica:0/task:0/device:CPU:0", 7, "not-a-device")}, `node "s" (_Send)`},
		{"remote recv without resolver", []*tfpb.NodeDef{recvNode("r", "t", f, "/job:worker/replica:0/task:0/device:CPU:0", 1, "/job:ps/replica:0/task:0/device:CPU:0")}, "no resolver"},
		{"empty graph", nil, "empty graph"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWorker(t)
			_, err := w.registerGraph(&tfpb.RegisterGraphRequest{GraphDef: graphDef(tt.nodes...)})
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tt.msg)
			}
			if !errors.Is(err, rpc.ErrInvalidArgument) {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
		})
	}
}

// TestOpDefaults runs nodes whose default attributes were stripped, as a
// master sends them.
func TestOpDefaults(t *testing.T) {
	w := newTestWorker(t)
	f := wire.DTFloat
	out, err := runLocal(t, w, graphDef(
		constF32("a", []int64{2, 2}, 1, 2, 3, 4),
		constF32("b", []int64{2, 2}, 1, 0, 0, 1),
		nodeDef("mm", "MatMul", in("a", "b"), attrs("T", f)), // transpose_a/b
		constI32("ax", nil, 0),
		nodeDef("sum", "Sum", in("mm", "ax"), attrs("T", f)),                     // keep_dims, Tidx
		nodeDef("shape", "Shape", in("sum"), attrs("T", f)),                      // out_type
		nodeDef("v", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{2})), // container, shared_name
		nodeDef("init", "AssignVariableOp", in("v", "sum"), attrs("dtype", f)),
		nodeDef("handle", "Identity", in("v"), attrs("T", wire.DTResource)),
		nodeDef("read", "ReadVariableOp", in("handle", "^init"), attrs("dtype", f)),
	), nil, "sum", "shape", "read")
	if err != nil {
		t.Fatal(err)
	}
	if got := floatsOf(&out[0]); !approxEqual(got, []float32{4, 6}) {
		t.Fatalf("sum = %v", got)
	}
	if out[1].DType != wire.DTInt32 || View[int32](out[1].Data)[0] != 2 {
		t.Fatalf("shape = %v %v", out[1].DType, out[1].Data)
	}
	if got := floatsOf(&out[2]); !approxEqual(got, []float32{4, 6}) {
		t.Fatalf("read = %v", got)
	}
}

// feedGraph is x (a client-terminated _Recv of [?,2] floats) times a
// constant, fetched through a client-terminated _Send.
func feedGraph(w *Worker) *tfpb.GraphDef {
	dev := w.Device()
	x := feedNode("x", "x:0", wire.DTFloat, dev)
	x.Attr["_output_shapes"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{
		Shape: []*tfpb.TensorShapeProto{{Dim: []*tfpb.TensorShapeProto_Dim{{Size: -1}, {Size: 2}}}}}}}
	return graphDef(
		x,
		constF32("w", []int64{2, 1}, 1, 2),
		nodeDef("z", "MatMul", in("x", "w"), attrs("T", wire.DTFloat)),
		fetchNode("z/_send", "z", "z:0", wire.DTFloat, dev, w.Incarnation()),
	)
}

func TestRunGraphFeedsOverStarwire(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	reg, err := task.wc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	dev, inc := task.w.Device(), task.w.Incarnation()
	good := f32([]int64{3, 2}, 1, 1, 2, 0, 0, 3)
	defer good.Buf.Release()
	run := func(step int64, sends map[string]wire.Tensor, fetch string) (*tfpb.RunGraphResponse, []float32, error) {
		req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step, RecvKey: []string{fetch}}
		var ts []wire.Tensor
		for k, v := range sends {
			req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: k})
			ts = append(ts, v)
		}
		var reply rpc.Reply
		defer reply.Release()
		resp, err := task.wc.RunGraph(ctx, req, ts, &reply)
		defer task.wc.CleanupGraph(ctx, step)
		if err != nil {
			return nil, nil, err
		}
		return resp, floatsOf(&reply.Tensors[0]), nil
	}
	xKey, zKey := feedKey("x:0", dev), fetchKey("z:0", dev, inc)
	resp, got, err := run(1, map[string]wire.Tensor{xKey: good}, zKey)
	if err != nil {
		t.Fatal(err)
	}
	if !approxEqual(got, []float32{3, 2, 6}) || resp.Recv[0].GetName() != zKey {
		t.Fatalf("z = %v (recv %v)", got, resp.Recv)
	}

	badDType := i64([]int64{3, 2})
	defer badDType.Buf.Release()
	badShape := f32([]int64{2, 3})
	defer badShape.Buf.Release()
	tests := []struct {
		name  string
		sends map[string]wire.Tensor
		fetch string
		msg   string
	}{
		{"dtype", map[string]wire.Tensor{xKey: badDType}, zKey, "is int64, node \"x\" takes float"},
		{"shape", map[string]wire.Tensor{xKey: badShape}, zKey, "has shape [2 3], node \"x\" takes [-1 2]"},
		{"unknown feed", map[string]wire.Tensor{xKey: good, feedKey("y:0", dev): good}, zKey, "feeds no client-terminated _Recv"},
		{"missing feed", nil, zKey, "is not fed"},
		{"unknown fetch", map[string]wire.Tensor{xKey: good}, fetchKey("q:0", dev, inc), "no client-terminated _Send"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(int64(10+i), tt.sends, tt.fetch)
			if !errors.Is(err, rpc.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want InvalidArgument containing %q", err, tt.msg)
			}
		})
	}
	// The worker keeps serving.
	if _, got, err := run(2, map[string]wire.Tensor{xKey: good}, zKey); err != nil || !approxEqual(got, []float32{3, 2, 6}) {
		t.Fatalf("after bad feeds: %v, %v", got, err)
	}
	if steps, keys := task.w.Rendezvous().Len(); keys != 0 || steps != 0 {
		t.Fatalf("rendezvous holds %d steps and %d keys after cleanup", steps, keys)
	}
}

func TestRunGraphOverGRPC(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	reg, err := task.grpc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	dev, inc := task.w.Device(), task.w.Incarnation()
	x := f32([]int64{1, 2}, 3, 4)
	defer x.Buf.Release()
	xp, _ := TensorToProto(&x)
	resp, err := task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 5,
		Send: []*tfpb.NamedTensorProto{{Name: feedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{fetchKey("z:0", dev, inc)}})
	if err != nil {
		t.Fatal(err)
	}
	z, err := TensorFromProto(resp.Recv[0].GetTensor())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Buf.Release()
	if !approxEqual(floatsOf(&z), []float32{11}) {
		t.Fatalf("z = %v", floatsOf(&z))
	}
	// A bad feed is InvalidArgument over gRPC too.
	xp.Dtype = tfpb.DataType_DT_INT32
	xp.TensorContent = xp.TensorContent[:8]
	_, err = task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 6,
		Send: []*tfpb.NamedTensorProto{{Name: feedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{fetchKey("z:0", dev, inc)}})
	if code := grpcCode(err); code != wire.InvalidArgument {
		t.Fatalf("bad feed over gRPC: %v (code %v)", err, code)
	}
	// store_errors_in_response_body puts the error in the response.
	resp, err = task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 7, StoreErrorsInResponseBody: true,
		Send: []*tfpb.NamedTensorProto{{Name: feedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{fetchKey("z:0", dev, inc)}})
	if err != nil || resp.GetStatusCode() != tfpb.Code_INVALID_ARGUMENT || resp.GetStatusErrorMessage() == "" {
		t.Fatalf("stored error: %v, %v", resp, err)
	}
}
