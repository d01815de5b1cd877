package handlers

import (
	"context"
	"strings"
	"testing"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// runLocal registers g on w and runs it once with named feeds, returning
// the fetched outputs (released by the test's cleanup).
func runLocal(t *testing.T, w *Worker, g *tfpb.GraphDef, feeds map[string]wire.Tensor, fetches ...string) ([]wire.Tensor, error) {
	t.Helper()
	reg, err := w.registerGraph(&tfpb.RegisterGraphRequest{GraphDef: g})
	if err != nil {
		return nil, err
	}
	req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 1, RecvKey: fetches}
	var ts []wire.Tensor
	for name, f := range feeds {
		req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: name})
		ts = append(ts, f)
	}
	_, out, err := w.runGraph(context.Background(), req, ts)
	for i := range ts {
		ts[i].Buf.Release()
	}
	w.rendezvous.Cleanup(1, errStepCleaned)
	t.Cleanup(func() {
		for i := range out {
			out[i].Buf.Release()
		}
	})
	return out, err
}

func newTestWorker(t *testing.T) *Worker {
	w, err := NewWorker(Options{Job: "ps", Task: 0, Incarnation: 7, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestOps(t *testing.T) {
	ph := func(name string, dt wire.DataType) *tfpb.NodeDef {
		return nodeDef(name, "Placeholder", nil, attrs("dtype", dt))
	}
	f := wire.DTFloat
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		feeds map[string]wire.Tensor
		want  wire.Tensor
	}{
		{"Add broadcast row", []*tfpb.NodeDef{ph("a", f), constF32("b", []int64{3}, 10, 20, 30), nodeDef("out", "AddV2", in("a", "b"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{2, 3}, 11, 22, 33, 14, 25, 36)},
		{"Add broadcast column", []*tfpb.NodeDef{ph("a", f), constF32("b", []int64{2, 1}, 10, 20), nodeDef("out", "Add", in("a", "b"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{2, 3}, 11, 12, 13, 24, 25, 26)},
		{"Mul broadcast 3-D", []*tfpb.NodeDef{ph("a", f), constF32("b", []int64{2, 1}, 10, 100), nodeDef("out", "Mul", in("a", "b"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 1, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{2, 2, 3}, 10, 20, 30, 100, 200, 300, 40, 50, 60, 400, 500, 600)},
		{"Maximum int64", []*tfpb.NodeDef{constI64("a", []int64{3}, 1, 5, -2), constI64("b", nil, 2), nodeDef("out", "Maximum", in("a", "b"), attrs("T", wire.DTInt64))},
			nil, i64([]int64{3}, 2, 5, 2)},
		{"RealDiv", []*tfpb.NodeDef{ph("a", f), constF32("b", []int64{2}, 2, 4), nodeDef("out", "RealDiv", in("a", "b"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2}, 1, 1)}, f32([]int64{2}, 0.5, 0.25)},
		{"Sub scalar", []*tfpb.NodeDef{constF32("one", nil, 1), ph("a", f), nodeDef("out", "Sub", in("one", "a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{3}, 0.25, 0.5, 1)}, f32([]int64{3}, 0.75, 0.5, 0)},
		{"Mul", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "Mul", in("a", "a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{3}, 1, -2, 3)}, f32([]int64{3}, 1, 4, 9)},
		{"Neg", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "Neg", in("a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2}, 1, -2)}, f32([]int64{2}, -1, 2)},
		{"Sigmoid", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "Sigmoid", in("a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{3}, 0, 100, -100)}, f32([]int64{3}, 0.5, 1, 0)},
		{"Log", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "Log", in("a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2}, 1, 2.718281828)}, f32([]int64{2}, 0, 1)},
		{"SigmoidGrad", []*tfpb.NodeDef{ph("y", f), ph("dy", f), nodeDef("out", "SigmoidGrad", in("y", "dy"), attrs("T", f))},
			map[string]wire.Tensor{"y": f32([]int64{2}, 0.5, 0.25), "dy": f32([]int64{2}, 1, 2)}, f32([]int64{2}, 0.25, 0.375)},
		{"Sum all", []*tfpb.NodeDef{ph("a", f), constI32("ax", []int64{2}, 0, 1), nodeDef("out", "Sum", in("a", "ax"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32(nil, 21)},
		{"Sum axis 0 keep_dims", []*tfpb.NodeDef{ph("a", f), constI32("ax", nil, 0), nodeDef("out", "Sum", in("a", "ax"), attrs("T", f, "keep_dims", true))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{1, 3}, 5, 7, 9)},
		{"Sum axis -1", []*tfpb.NodeDef{ph("a", f), constI64("ax", nil, -1), nodeDef("out", "Sum", in("a", "ax"), attrs("T", f, "Tidx", wire.DTInt64))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{2}, 6, 15)},
		{"Sum middle axis of 3-D", []*tfpb.NodeDef{ph("a", f), constI32("ax", []int64{1}, 1), nodeDef("out", "Sum", in("a", "ax"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 2, 2}, 1, 2, 3, 4, 5, 6, 7, 8)}, f32([]int64{2, 2}, 4, 6, 12, 14)},
		{"Sum of int64 scalar", []*tfpb.NodeDef{constI64("a", nil, 7), constI32("ax", []int64{0}), nodeDef("out", "Sum", in("a", "ax"), attrs("T", wire.DTInt64))},
			nil, i64(nil, 7)},
		{"Mean", []*tfpb.NodeDef{ph("a", f), constI32("ax", nil, 1), nodeDef("out", "Mean", in("a", "ax"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 2}, 1, 3, 5, 7)}, f32([]int64{2}, 2, 6)},
		{"MatMul", []*tfpb.NodeDef{ph("a", f), constF32("b", []int64{3, 1}, 1, 0, -1), nodeDef("out", "MatMul", in("a", "b"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, f32([]int64{2, 1}, -2, -2)},
		{"MatMul transposed", []*tfpb.NodeDef{ph("a", f), ph("b", f), nodeDef("out", "MatMul", in("a", "b"), attrs("T", f, "transpose_a", true, "transpose_b", true))},
			map[string]wire.Tensor{"a": f32([]int64{2, 1}, 1, 2), "b": f32([]int64{3, 2}, 1, 1, 2, 0, 0, 3)}, f32([]int64{1, 3}, 3, 2, 6)},
		{"Reshape -1", []*tfpb.NodeDef{ph("a", f), constI32("s", []int64{2}, -1, 2), nodeDef("out", "Reshape", in("a", "s"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{4}, 1, 2, 3, 4)}, f32([]int64{2, 2}, 1, 2, 3, 4)},
		{"Shape", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "Shape", in("a"), attrs("T", f, "out_type", wire.DTInt64))},
			map[string]wire.Tensor{"a": f32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, i64([]int64{2}, 2, 3)},
		{"ZerosLike", []*tfpb.NodeDef{ph("a", f), nodeDef("out", "ZerosLike", in("a"), attrs("T", f))},
			map[string]wire.Tensor{"a": f32([]int64{2}, 1, 2)}, f32([]int64{2}, 0, 0)},
		{"Fill", []*tfpb.NodeDef{constI32("d", []int64{2}, 2, 2), constF32("v", nil, 1.5), nodeDef("out", "Fill", in("d", "v"), attrs("T", f))},
			nil, f32([]int64{2, 2}, 1.5, 1.5, 1.5, 1.5)},
		{"GatherV2 axis 0", []*tfpb.NodeDef{ph("p", f), constI64("i", []int64{3}, 2, 0, 2), constI32("ax", nil, 0),
			nodeDef("out", "GatherV2", in("p", "i", "ax"), attrs("Tparams", f, "Tindices", wire.DTInt64, "Taxis", wire.DTInt32))},
			map[string]wire.Tensor{"p": f32([]int64{3, 2}, 1, 2, 3, 4, 5, 6)}, f32([]int64{3, 2}, 5, 6, 1, 2, 5, 6)},
		{"GatherV2 axis 1", []*tfpb.NodeDef{ph("p", f), constI32("i", []int64{1}, 1), constI32("ax", nil, 1),
			nodeDef("out", "GatherV2", in("p", "i", "ax"), attrs("Tparams", f, "Tindices", wire.DTInt32, "Taxis", wire.DTInt32))},
			map[string]wire.Tensor{"p": f32([]int64{3, 2}, 1, 2, 3, 4, 5, 6)}, f32([]int64{3, 1}, 2, 4, 6)},
		{"Identity of int64", []*tfpb.NodeDef{constI64("c", []int64{2}, 5), nodeDef("out", "Identity", in("c"), attrs("T", wire.DTInt64))},
			nil, i64([]int64{2}, 5, 5)},
		{"Const broadcast", []*tfpb.NodeDef{constF32("out", []int64{2, 2}, 1, 2)}, nil, f32([]int64{2, 2}, 1, 2, 2, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWorker(t)
			out, err := runLocal(t, w, graphDef(tt.nodes...), tt.feeds, "out")
			if err != nil {
				t.Fatal(err)
			}
			got := out[0]
			if got.DType != tt.want.DType || !sameShape(got.Shape, tt.want.Shape) {
				t.Fatalf("got %v%v, want %v%v", got.DType, got.Shape, tt.want.DType, tt.want.Shape)
			}
			switch got.DType {
			case wire.DTFloat:
				if !approxEqual(floatsOf(&got), floatsOf(&tt.want)) {
					t.Fatalf("got %v, want %v", floatsOf(&got), floatsOf(&tt.want))
				}
			default:
				if string(got.Data) != string(tt.want.Data) {
					t.Fatalf("got %v, want %v", View[int64](got.Data), View[int64](tt.want.Data))
				}
			}
			tt.want.Buf.Release()
		})
	}
}

func TestOpErrorsAtRun(t *testing.T) {
	f := wire.DTFloat
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		msg   string
		code  wire.Code
	}{
		{"MatMul inner dims", []*tfpb.NodeDef{constF32("a", []int64{2, 3}), constF32("b", []int64{2, 3}), nodeDef("out", "MatMul", in("a", "b"), attrs("T", f))}, "inner dimensions", wire.InvalidArgument},
		{"incompatible broadcast", []*tfpb.NodeDef{constF32("a", []int64{2}), constF32("b", []int64{3}), nodeDef("out", "Add", in("a", "b"), attrs("T", f))}, "incompatible shapes", wire.InvalidArgument},
		{"gather out of range", []*tfpb.NodeDef{constF32("p", []int64{2}), constI32("i", []int64{1}, 2), constI32("ax", nil, 0),
			nodeDef("out", "GatherV2", in("p", "i", "ax"), attrs("Tparams", f, "Tindices", wire.DTInt32, "Taxis", wire.DTInt32))}, "not in [0, 2)", wire.InvalidArgument},
		{"uninitialized variable", []*tfpb.NodeDef{nodeDef("v", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{2})),
			nodeDef("out", "ReadVariableOp", in("v"), attrs("dtype", f))}, "uninitialized", wire.FailedPrecondition},
		{"input dtype", []*tfpb.NodeDef{constF32("a", []int64{2}), constI32("b", []int64{2}), nodeDef("out", "Add", in("a", "b"), attrs("T", f))}, "want float", wire.InvalidArgument},
		{"huge Fill", []*tfpb.NodeDef{constI64("d", []int64{2}, 1<<20, 1<<20), constF32("v", nil, 1), nodeDef("out", "Fill", in("d", "v"), attrs("T", f, "index_type", wire.DTInt64))}, "over", wire.ResourceExhausted},
		{"huge MatMul", []*tfpb.NodeDef{constF32("a", []int64{1 << 16, 1}), constF32("b", []int64{1, 1 << 16}), nodeDef("out", "MatMul", in("a", "b"), attrs("T", f))}, "over", wire.ResourceExhausted},
		{"placeholder not fed", []*tfpb.NodeDef{nodeDef("out", "Placeholder", nil, attrs("dtype", f))}, "not fed", wire.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newTestWorker(t)
			_, err := runLocal(t, w, graphDef(tt.nodes...), nil, "out")
			if err == nil || !strings.Contains(err.Error(), tt.msg) || rpc.CodeOf(err) != tt.code {
				t.Fatalf("err = %v (code %v), want %v containing %q", err, rpc.CodeOf(err), tt.code, tt.msg)
			}
			if !strings.Contains(err.Error(), `node "out"`) && tt.name != "placeholder not fed" {
				t.Fatalf("error %q does not name the node", err)
			}
		})
	}
}
