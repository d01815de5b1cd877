package graph_test

import (
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func typeArg(name, typeAttr string) *tfpb.OpDef_ArgDef {
	return &tfpb.OpDef_ArgDef{Name: name, TypeAttr: typeAttr}
}

func placeholder(name string) *tfpb.AttrValue {
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_Placeholder{Placeholder: name}}
}

// mulAdd is f(x, y) = x·y + x over any T, in a body that addresses
// outputs by argument name, as TensorFlow writes function bodies.
func mulAdd() *tfpb.FunctionDef {
	return &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "mul_add", InputArg: []*tfpb.OpDef_ArgDef{typeArg("x", "T"), typeArg("y", "T")},
			OutputArg: []*tfpb.OpDef_ArgDef{typeArg("out", "T")}, Attr: []*tfpb.OpDef_AttrDef{{Name: "T", Type: "type"}}},
		NodeDef: []*tfpb.NodeDef{
			{Name: "mul", Op: "Mul", Input: []string{"x", "y"}, Attr: map[string]*tfpb.AttrValue{"T": placeholder("T")}},
			{Name: "add", Op: "AddV2", Input: []string{"mul:z:0", "x"}, Attr: map[string]*tfpb.AttrValue{"T": placeholder("T")}},
		},
		Ret: map[string]string{"out": "add:z:0"},
	}
}

// countIDs returns the distinct ids of its argument and how many there
// are, through Unique's second output and a nested call of mul_add.
func countIDs() *tfpb.FunctionDef {
	i64 := &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType_DT_INT64}}
	return &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "count_ids", InputArg: []*tfpb.OpDef_ArgDef{{Name: "ids", Type: tfpb.DataType_DT_INT64}},
			OutputArg: []*tfpb.OpDef_ArgDef{{Name: "uniq", Type: tfpb.DataType_DT_INT64}, {Name: "twice_n", Type: tfpb.DataType_DT_INT32}}},
		NodeDef: []*tfpb.NodeDef{
			{Name: "u", Op: "Unique", Input: []string{"ids"}, Attr: map[string]*tfpb.AttrValue{"T": i64}},
			{Name: "n", Op: "Size", Input: []string{"u:y:0"}, Attr: map[string]*tfpb.AttrValue{"T": i64}},
			// n·n + n, with the nested call's T bound here.
			{Name: "sq", Op: "mul_add", Input: []string{"n:output:0", "n:output:0"}, Attr: map[string]*tfpb.AttrValue{"T": {Value: &tfpb.AttrValue_Type{Type: tfpb.DataType_DT_INT32}}}},
		},
		Ret: map[string]string{"uniq": "u:y:0", "twice_n": "sq:out:0"},
	}
}

// bump adds its second argument to the variable its first is the handle
// of; it has no results, only the side effect.
func bump() *tfpb.FunctionDef {
	f := &tfpb.AttrValue{Value: &tfpb.AttrValue_Type{Type: tfpb.DataType_DT_FLOAT}}
	return &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "bump", InputArg: []*tfpb.OpDef_ArgDef{{Name: "v", Type: tfpb.DataType_DT_RESOURCE}, {Name: "d", Type: tfpb.DataType_DT_FLOAT}},
			ControlOutput: []string{"add"}, IsStateful: true},
		NodeDef:    []*tfpb.NodeDef{{Name: "add", Op: "AssignAddVariableOp", Input: []string{"v", "d"}, Attr: map[string]*tfpb.AttrValue{"dtype": f}}},
		ControlRet: map[string]string{"add": "add"},
	}
}

func withLibrary(g *tfpb.GraphDef, fns ...*tfpb.FunctionDef) *tfpb.GraphDef {
	g.Library = &tfpb.FunctionDefLibrary{Function: fns}
	return g
}

func call(name, fn string, inputs []string, tin, tout []wire.DataType, attrs map[string]*tfpb.AttrValue) *tfpb.NodeDef {
	n := NodeDef(name, "StatefulPartitionedCall", inputs, Attrs("Tin", tin, "Tout", tout))
	n.Attr["f"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Func{Func: &tfpb.NameAttrList{Name: fn, Attr: attrs}}}
	return n
}

func TestFunctionCalls(t *testing.T) {
	f, i32, i64 := wire.DTFloat, wire.DTInt32, wire.DTInt64
	env := NewEnv(t)
	g := withLibrary(GraphDef(
		ConstF32("a", []int64{2}, 1, 2),
		ConstF32("b", []int64{2}, 3, 4),
		// a·b + a = [4, 10] through a PartitionedCall binding T in f ...
		call("pc", "mul_add", In("a", "b"), []wire.DataType{f, f}, []wire.DataType{f}, Attrs("T", f)),
		// ... and through a plain call node, whose attributes bind T.
		NodeDef("direct", "mul_add", In("pc", "a"), Attrs("T", f)),
		ConstI64("ids", []int64{5}, 7, 3, 7, 7, 9),
		call("count", "count_ids", In("ids"), []wire.DataType{i64}, []wire.DataType{i64, i32}, nil),
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
		NodeDef("init", "AssignVariableOp", In("v", "a"), Attrs("dtype", f)),
		call("bumped", "bump", In("v", "b", "^init"), []wire.DataType{wire.DTResource, f}, nil, nil),
		NodeDef("read", "ReadVariableOp", In("v", "^bumped"), Attrs("dtype", f)),
	), mulAdd(), countIDs(), bump())
	out, err := Run(t, env, g, nil, "pc", "direct", "count:0", "count:1", "read")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{4, 10}) {
		t.Fatalf("pc = %v, want [4 10]", got)
	}
	// pc·a + pc = [4·1+4, 10·2+10]
	if got := Floats(&out[1]); !ApproxEqual(got, []float32{8, 30}) {
		t.Fatalf("direct = %v, want [8 30]", got)
	}
	if got := tensor.View[int64](out[2].Data); out[2].DType != i64 || len(got) != 3 || got[0] != 7 || got[1] != 3 || got[2] != 9 {
		t.Fatalf("count:0 = %v %v, want [7 3 9]", out[2].DType, got)
	}
	// n = 3: n·n + n = 12.
	if got := tensor.View[int32](out[3].Data); out[3].DType != i32 || len(got) != 1 || got[0] != 12 {
		t.Fatalf("count:1 = %v %v, want [12]", out[3].DType, got)
	}
	// The read waits for the call's side effect: a + b.
	if got := Floats(&out[4]); !ApproxEqual(got, []float32{4, 6}) {
		t.Fatalf("read = %v, want [4 6]", got)
	}
}

func TestFunctionCallsRejected(t *testing.T) {
	f := wire.DTFloat
	unsupported := mulAdd()
	unsupported.Signature.Name = "conv"
	unsupported.NodeDef[0].Op = "Conv2D"
	recursive := mulAdd()
	recursive.Signature.Name = "loop"
	recursive.NodeDef[1].Op = "loop"
	recursive.Ret["out"] = "add:out:0"
	badRet := mulAdd()
	badRet.Signature.Name = "bad_ret"
	badRet.Ret["out"] = "add:nope:0:1"
	args := In("a", "b")
	consts := []*tfpb.NodeDef{ConstF32("a", nil, 1), ConstF32("b", nil, 2)}
	tests := []struct {
		name string
		g    *tfpb.GraphDef
		code wire.Code
		msg  []string
	}{
		{"unsupported op in a body", withLibrary(GraphDef(append(consts, call("c", "conv", args, []wire.DataType{f, f}, []wire.DataType{f}, Attrs("T", f)))...), unsupported),
			wire.NotFound, []string{"Op type not registered 'Conv2D'", `function "conv", node "mul", inlined at node "c"`}},
		{"recursion", withLibrary(GraphDef(append(consts, NodeDef("c", "loop", args, Attrs("T", f)))...), recursive),
			wire.InvalidArgument, []string{`node "c/add" calls function "loop" recursively (loop -> loop)`}},
		{"unbound attribute", withLibrary(GraphDef(append(consts, call("c", "mul_add", args, []wire.DataType{f, f}, []wire.DataType{f}, nil))...), mulAdd()),
			wire.InvalidArgument, []string{`node "c" (StatefulPartitionedCall) calling function "mul_add": attr "T" is not set`}},
		{"no such function", withLibrary(GraphDef(append(consts, call("c", "nothing", args, nil, nil, nil))...), mulAdd()),
			wire.NotFound, []string{`calls function "nothing", which the library does not define`}},
		{"wrong argument count", withLibrary(GraphDef(append(consts, NodeDef("c", "mul_add", In("a"), Attrs("T", f)))...), mulAdd()),
			wire.InvalidArgument, []string{`node "c" (mul_add) calling function "mul_add": has 1 data inputs, the function takes more`}},
		{"bad ret", withLibrary(GraphDef(append(consts, NodeDef("c", "bad_ret", args, Attrs("T", f)))...), badRet),
			wire.InvalidArgument, []string{`output "out": ret "add:nope:0:1"`}},
		{"body dtype error names the function", withLibrary(GraphDef(append(consts, NodeDef("c", "mul_add", args, Attrs("T", wire.DTString)))...), mulAdd()),
			wire.InvalidArgument, []string{`node "c/mul" (Mul)`, `in function "mul_add", node "mul", inlined at node "c"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.Build(tt.g, NewEnv(t))
			if status.CodeOf(err) != tt.code {
				t.Fatalf("err = %v (code %v), want %v", err, status.CodeOf(err), tt.code)
			}
			for _, m := range tt.msg {
				if !strings.Contains(err.Error(), m) {
					t.Fatalf("err = %v, want it to contain %q", err, m)
				}
			}
		})
	}
}
