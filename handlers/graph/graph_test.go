package graph_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func TestRegisterGraphRejects(t *testing.T) {
	f := wire.DTFloat
	tests := []struct {
		name  string
		nodes []*tfpb.NodeDef
		msg   string // the error must contain it
	}{
		{"missing attr", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "Neg", In("a"), nil)}, `node "n" (Neg): missing attr "T"`},
		{"attr of wrong kind", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "Neg", In("a"), Attrs("T", "float"))}, `node "n" (Neg): attr "T" is not a type`},
		{"unsupported dtype", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "Sigmoid", In("a"), Attrs("T", wire.DTInt32))}, `node "n" (Sigmoid): attr "T" is int32`},
		{"no such input", []*tfpb.NodeDef{NodeDef("n", "Neg", In("ghost"), Attrs("T", f))}, `node "n" (Neg): input "ghost": no such node`},
		{"bad output index", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "Neg", In("a:x"), Attrs("T", f))}, `input "a:x": bad output index`},
		{"output out of range", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "Neg", In("a:1"), Attrs("T", f))}, `node "n" (Neg): input a:1: Const has 1 outputs`},
		{"no such control input", []*tfpb.NodeDef{NodeDef("n", "NoOp", In("^ghost"), nil)}, `control input "^ghost"`},
		{"wrong input count", []*tfpb.NodeDef{ConstF32("a", nil, 1), NodeDef("n", "MatMul", In("a"), Attrs("T", f))}, `node "n" (MatMul): has 1 data inputs, want 2`},
		{"duplicate name", []*tfpb.NodeDef{ConstF32("a", nil, 1), ConstF32("a", nil, 2)}, `node "a" (Const): duplicate node name`},
		{"cycle", []*tfpb.NodeDef{NodeDef("x", "Identity", In("y"), Attrs("T", f)), NodeDef("y", "Identity", In("x"), Attrs("T", f))}, "cycle"},
		{"const dtype mismatch", []*tfpb.NodeDef{NodeDef("c", "Const", nil, Attrs("dtype", wire.DTInt32, "value", &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT}))}, `node "c" (Const): value is float`},
		{"const too many values", []*tfpb.NodeDef{ConstF32("c", []int64{1}, 1, 2)}, `node "c" (Const)`},
		{"bad send device", []*tfpb.NodeDef{ConstF32("a", nil, 1), SendNode("s", "a", "t", f, "/job:ps/replica:0/task:0/device:CPU:0", 7, "not-a-device")}, `node "s" (_Send)`},
		{"remote recv without resolver", []*tfpb.NodeDef{RecvNode("r", "t", f, "/job:worker/replica:0/task:0/device:CPU:0", 1, "/job:ps/replica:0/task:0/device:CPU:0")}, "no resolver"},
		{"empty graph", nil, "empty graph"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.Build(GraphDef(tt.nodes...), NewEnv(t))
			if err == nil || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want one containing %q", err, tt.msg)
			}
			if !errors.Is(err, status.ErrInvalidArgument) {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
		})
	}
}

// TestUnknownOpIsNotFound checks TensorFlow's answer to an op this binary
// lacks: NotFound, in its words, naming the node.
func TestUnknownOpIsNotFound(t *testing.T) {
	env := NewEnv(t)
	env.Host = "ps0.example"
	_, err := graph.Build(GraphDef(ConstF32("a", nil, 1), NodeDef("conv", "Conv2D", In("a"), nil)), env)
	want := `Op type not registered 'Conv2D' in binary running on ps0.example.`
	var st *status.Status
	if !errors.As(err, &st) || st.Code != wire.NotFound || !strings.HasPrefix(st.Msg, want) || !strings.Contains(st.Msg, `node "conv"`) {
		t.Fatalf("err = %v, want NotFound starting %q and naming the node", err, want)
	}
}

// TestOpDefaults runs nodes whose default attributes were stripped, as a
// master sends them.
func TestOpDefaults(t *testing.T) {
	f := wire.DTFloat
	out, err := Run(t, NewEnv(t), GraphDef(
		ConstF32("a", []int64{2, 2}, 1, 2, 3, 4),
		ConstF32("b", []int64{2, 2}, 1, 0, 0, 1),
		NodeDef("mm", "MatMul", In("a", "b"), Attrs("T", f)), // transpose_a/b
		ConstI32("ax", nil, 0),
		NodeDef("sum", "Sum", In("mm", "ax"), Attrs("T", f)),                     // keep_dims, Tidx
		NodeDef("shape", "Shape", In("sum"), Attrs("T", f)),                      // out_type
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})), // container, shared_name
		NodeDef("init", "AssignVariableOp", In("v", "sum"), Attrs("dtype", f)),
		NodeDef("handle", "Identity", In("v"), Attrs("T", wire.DTResource)),
		NodeDef("read", "ReadVariableOp", In("handle", "^init"), Attrs("dtype", f)),
	), nil, "sum", "shape", "read")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{4, 6}) {
		t.Fatalf("sum = %v", got)
	}
	if out[1].DType != wire.DTInt32 || tensor.View[int32](out[1].Data)[0] != 2 {
		t.Fatalf("shape = %v %v", out[1].DType, out[1].Data)
	}
	if got := Floats(&out[2]); !ApproxEqual(got, []float32{4, 6}) {
		t.Fatalf("read = %v", got)
	}
}
