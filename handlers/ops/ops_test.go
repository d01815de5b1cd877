package ops_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestOps(t *testing.T) {
	ph := func(name string, dt wire.DataType) *tfpb.NodeDef {
		return NodeDef(name, "Placeholder", nil, Attrs("dtype", dt))
	}
	f := wire.DTFloat
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		feeds map[string]wire.Tensor
		want  wire.Tensor
	}{
		{"Add broadcast row", []*tfpb.NodeDef{ph("a", f), ConstF32("b", []int64{3}, 10, 20, 30), NodeDef("out", "AddV2", In("a", "b"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{2, 3}, 11, 22, 33, 14, 25, 36)},
		{"Add broadcast column", []*tfpb.NodeDef{ph("a", f), ConstF32("b", []int64{2, 1}, 10, 20), NodeDef("out", "Add", In("a", "b"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{2, 3}, 11, 12, 13, 24, 25, 26)},
		{"Mul broadcast 3-D", []*tfpb.NodeDef{ph("a", f), ConstF32("b", []int64{2, 1}, 10, 100), NodeDef("out", "Mul", In("a", "b"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 1, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{2, 2, 3}, 10, 20, 30, 100, 200, 300, 40, 50, 60, 400, 500, 600)},
		{"Maximum int64", []*tfpb.NodeDef{ConstI64("a", []int64{3}, 1, 5, -2), ConstI64("b", nil, 2), NodeDef("out", "Maximum", In("a", "b"), Attrs("T", wire.DTInt64))},
			nil, I64([]int64{3}, 2, 5, 2)},
		{"RealDiv", []*tfpb.NodeDef{ph("a", f), ConstF32("b", []int64{2}, 2, 4), NodeDef("out", "RealDiv", In("a", "b"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2}, 1, 1)}, F32([]int64{2}, 0.5, 0.25)},
		{"Sub scalar", []*tfpb.NodeDef{ConstF32("one", nil, 1), ph("a", f), NodeDef("out", "Sub", In("one", "a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{3}, 0.25, 0.5, 1)}, F32([]int64{3}, 0.75, 0.5, 0)},
		{"Mul", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "Mul", In("a", "a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{3}, 1, -2, 3)}, F32([]int64{3}, 1, 4, 9)},
		{"Neg", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "Neg", In("a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2}, 1, -2)}, F32([]int64{2}, -1, 2)},
		{"Sigmoid", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "Sigmoid", In("a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{3}, 0, 100, -100)}, F32([]int64{3}, 0.5, 1, 0)},
		{"Log", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "Log", In("a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2}, 1, 2.718281828)}, F32([]int64{2}, 0, 1)},
		{"SigmoidGrad", []*tfpb.NodeDef{ph("y", f), ph("dy", f), NodeDef("out", "SigmoidGrad", In("y", "dy"), Attrs("T", f))},
			map[string]wire.Tensor{"y": F32([]int64{2}, 0.5, 0.25), "dy": F32([]int64{2}, 1, 2)}, F32([]int64{2}, 0.25, 0.375)},
		{"Sum all", []*tfpb.NodeDef{ph("a", f), ConstI32("ax", []int64{2}, 0, 1), NodeDef("out", "Sum", In("a", "ax"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32(nil, 21)},
		{"Sum axis 0 keep_dims", []*tfpb.NodeDef{ph("a", f), ConstI32("ax", nil, 0), NodeDef("out", "Sum", In("a", "ax"), Attrs("T", f, "keep_dims", true))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{1, 3}, 5, 7, 9)},
		{"Sum axis -1", []*tfpb.NodeDef{ph("a", f), ConstI64("ax", nil, -1), NodeDef("out", "Sum", In("a", "ax"), Attrs("T", f, "Tidx", wire.DTInt64))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{2}, 6, 15)},
		{"Sum middle axis of 3-D", []*tfpb.NodeDef{ph("a", f), ConstI32("ax", []int64{1}, 1), NodeDef("out", "Sum", In("a", "ax"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 2, 2}, 1, 2, 3, 4, 5, 6, 7, 8)}, F32([]int64{2, 2}, 4, 6, 12, 14)},
		{"Sum of int64 scalar", []*tfpb.NodeDef{ConstI64("a", nil, 7), ConstI32("ax", []int64{0}), NodeDef("out", "Sum", In("a", "ax"), Attrs("T", wire.DTInt64))},
			nil, I64(nil, 7)},
		{"Mean", []*tfpb.NodeDef{ph("a", f), ConstI32("ax", nil, 1), NodeDef("out", "Mean", In("a", "ax"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 2}, 1, 3, 5, 7)}, F32([]int64{2}, 2, 6)},
		{"MatMul", []*tfpb.NodeDef{ph("a", f), ConstF32("b", []int64{3, 1}, 1, 0, -1), NodeDef("out", "MatMul", In("a", "b"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, F32([]int64{2, 1}, -2, -2)},
		{"MatMul transposed", []*tfpb.NodeDef{ph("a", f), ph("b", f), NodeDef("out", "MatMul", In("a", "b"), Attrs("T", f, "transpose_a", true, "transpose_b", true))},
			map[string]wire.Tensor{"a": F32([]int64{2, 1}, 1, 2), "b": F32([]int64{3, 2}, 1, 1, 2, 0, 0, 3)}, F32([]int64{1, 3}, 3, 2, 6)},
		{"Reshape -1", []*tfpb.NodeDef{ph("a", f), ConstI32("s", []int64{2}, -1, 2), NodeDef("out", "Reshape", In("a", "s"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{4}, 1, 2, 3, 4)}, F32([]int64{2, 2}, 1, 2, 3, 4)},
		{"Shape", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "Shape", In("a"), Attrs("T", f, "out_type", wire.DTInt64))},
			map[string]wire.Tensor{"a": F32([]int64{2, 3}, 1, 2, 3, 4, 5, 6)}, I64([]int64{2}, 2, 3)},
		{"ZerosLike", []*tfpb.NodeDef{ph("a", f), NodeDef("out", "ZerosLike", In("a"), Attrs("T", f))},
			map[string]wire.Tensor{"a": F32([]int64{2}, 1, 2)}, F32([]int64{2}, 0, 0)},
		{"Fill", []*tfpb.NodeDef{ConstI32("d", []int64{2}, 2, 2), ConstF32("v", nil, 1.5), NodeDef("out", "Fill", In("d", "v"), Attrs("T", f))},
			nil, F32([]int64{2, 2}, 1.5, 1.5, 1.5, 1.5)},
		{"GatherV2 axis 0", []*tfpb.NodeDef{ph("p", f), ConstI64("i", []int64{3}, 2, 0, 2), ConstI32("ax", nil, 0),
			NodeDef("out", "GatherV2", In("p", "i", "ax"), Attrs("Tparams", f, "Tindices", wire.DTInt64, "Taxis", wire.DTInt32))},
			map[string]wire.Tensor{"p": F32([]int64{3, 2}, 1, 2, 3, 4, 5, 6)}, F32([]int64{3, 2}, 5, 6, 1, 2, 5, 6)},
		{"GatherV2 axis 1", []*tfpb.NodeDef{ph("p", f), ConstI32("i", []int64{1}, 1), ConstI32("ax", nil, 1),
			NodeDef("out", "GatherV2", In("p", "i", "ax"), Attrs("Tparams", f, "Tindices", wire.DTInt32, "Taxis", wire.DTInt32))},
			map[string]wire.Tensor{"p": F32([]int64{3, 2}, 1, 2, 3, 4, 5, 6)}, F32([]int64{3, 1}, 2, 4, 6)},
		{"Identity of int64", []*tfpb.NodeDef{ConstI64("c", []int64{2}, 5), NodeDef("out", "Identity", In("c"), Attrs("T", wire.DTInt64))},
			nil, I64([]int64{2}, 5, 5)},
		{"Const broadcast", []*tfpb.NodeDef{ConstF32("out", []int64{2, 2}, 1, 2)}, nil, F32([]int64{2, 2}, 1, 2, 2, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Run(t, NewEnv(t), GraphDef(tt.nodes...), tt.feeds, "out")
			if err != nil {
				t.Fatal(err)
			}
			got := out[0]
			if got.DType != tt.want.DType || !slices.Equal(got.Shape, tt.want.Shape) {
				t.Fatalf("got %v%v, want %v%v", got.DType, got.Shape, tt.want.DType, tt.want.Shape)
			}
			switch got.DType {
			case wire.DTFloat:
				if !ApproxEqual(Floats(&got), Floats(&tt.want)) {
					t.Fatalf("got %v, want %v", Floats(&got), Floats(&tt.want))
				}
			default:
				if string(got.Data) != string(tt.want.Data) {
					t.Fatalf("got %v, want %v", tensor.View[int64](got.Data), tensor.View[int64](tt.want.Data))
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
		{"MatMul inner dims", []*tfpb.NodeDef{ConstF32("a", []int64{2, 3}), ConstF32("b", []int64{2, 3}), NodeDef("out", "MatMul", In("a", "b"), Attrs("T", f))}, "inner dimensions", wire.InvalidArgument},
		{"incompatible broadcast", []*tfpb.NodeDef{ConstF32("a", []int64{2}), ConstF32("b", []int64{3}), NodeDef("out", "Add", In("a", "b"), Attrs("T", f))}, "incompatible shapes", wire.InvalidArgument},
		{"gather out of range", []*tfpb.NodeDef{ConstF32("p", []int64{2}), ConstI32("i", []int64{1}, 2), ConstI32("ax", nil, 0),
			NodeDef("out", "GatherV2", In("p", "i", "ax"), Attrs("Tparams", f, "Tindices", wire.DTInt32, "Taxis", wire.DTInt32))}, "not in [0, 2)", wire.InvalidArgument},
		{"uninitialized variable", []*tfpb.NodeDef{NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
			NodeDef("out", "ReadVariableOp", In("v"), Attrs("dtype", f))}, "uninitialized", wire.FailedPrecondition},
		{"input dtype", []*tfpb.NodeDef{ConstF32("a", []int64{2}), ConstI32("b", []int64{2}), NodeDef("out", "Add", In("a", "b"), Attrs("T", f))}, "want float", wire.InvalidArgument},
		{"huge Fill", []*tfpb.NodeDef{ConstI64("d", []int64{2}, 1<<20, 1<<20), ConstF32("v", nil, 1), NodeDef("out", "Fill", In("d", "v"), Attrs("T", f, "index_type", wire.DTInt64))}, "over", wire.ResourceExhausted},
		{"huge MatMul", []*tfpb.NodeDef{ConstF32("a", []int64{1 << 16, 1}), ConstF32("b", []int64{1, 1 << 16}), NodeDef("out", "MatMul", In("a", "b"), Attrs("T", f))}, "over", wire.ResourceExhausted},
		{"placeholder not fed", []*tfpb.NodeDef{NodeDef("out", "Placeholder", nil, Attrs("dtype", f))}, "not fed", wire.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t, NewEnv(t), GraphDef(tt.nodes...), nil, "out")
			if err == nil || !strings.Contains(err.Error(), tt.msg) || status.CodeOf(err) != tt.code {
				t.Fatalf("err = %v (code %v), want %v containing %q", err, status.CodeOf(err), tt.code, tt.msg)
			}
			if !strings.Contains(err.Error(), `node "out"`) && tt.name != "placeholder not fed" {
				t.Fatalf("error %q does not name the node", err)
			}
		})
	}
}

// TestUnsupportedDTypes checks that a node whose type attribute names a
// type its op has no kernel for is refused when the graph is built, with
// InvalidArgument (TensorFlow's "No OpKernel was registered") listing the
// types the op supports.
func TestUnsupportedDTypes(t *testing.T) {
	s, i32 := wire.DTString, wire.DTInt32
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		msg   string
	}{
		{"Add of strings", []*tfpb.NodeDef{ConstStr("a", nil, "x"), NodeDef("out", "Add", In("a", "a"), Attrs("T", s))},
			`attr "T" is string, want one of [float double int32 int64]`},
		{"RealDiv of ints", []*tfpb.NodeDef{ConstI32("a", nil, 1), NodeDef("out", "RealDiv", In("a", "a"), Attrs("T", i32))},
			`attr "T" is int32, want one of [float double]`},
		{"Sigmoid of ints", []*tfpb.NodeDef{ConstI32("a", nil, 1), NodeDef("out", "Sigmoid", In("a"), Attrs("T", i32))},
			`attr "T" is int32, want one of [float double]`},
		{"Cast to string", []*tfpb.NodeDef{ConstI32("a", nil, 1), NodeDef("out", "Cast", In("a"), Attrs("SrcT", i32, "DstT", s))},
			`attr "DstT" is string, want one of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(t, NewEnv(t), GraphDef(tt.nodes...), nil, "out")
			if !strings.Contains(fmt.Sprint(err), tt.msg) || status.CodeOf(err) != wire.InvalidArgument {
				t.Fatalf("err = %v (code %v), want InvalidArgument containing %q", err, status.CodeOf(err), tt.msg)
			}
		})
	}
}
