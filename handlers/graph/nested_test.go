package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// bodyCall is a call node in a function body, as TensorFlow 2 writes
// them: a (Stateful)PartitionedCall whose f names the callee.
func bodyCall(name, op, fn string, inputs []string, tin, tout []wire.DataType) *tfpb.NodeDef {
	n := NodeDef(name, op, inputs, Attrs("Tin", tin, "Tout", tout))
	n.Attr["f"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Func{Func: &tfpb.NameAttrList{Name: fn}}}
	return n
}

// nestedLibrary is three functions, each calling the next through a
// partitioned call inside its body:
//
//	outer(x, v) = Identity(mid(x, v))                  PartitionedCall
//	mid(x, v)   = inner(x, v) + 1, control output the call
//	inner(x, v) = 3·x, control output v += x            StatefulPartitionedCall
//
// The side effect is only reachable through the control outputs, so a
// read after the outermost call sees it only if they are honored at every
// level.
func nestedLibrary() []*tfpb.FunctionDef {
	f, res := wire.DTFloat, wire.DTResource
	fa := map[string]*tfpb.AttrValue{"T": {Value: &tfpb.AttrValue_Type{Type: tfpb.DataType_DT_FLOAT}}}
	args := []*tfpb.OpDef_ArgDef{{Name: "x", Type: tfpb.DataType_DT_FLOAT}, {Name: "v", Type: tfpb.DataType_DT_RESOURCE}}
	out := []*tfpb.OpDef_ArgDef{{Name: "y", Type: tfpb.DataType_DT_FLOAT}}
	inner := &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "inner", InputArg: args, OutputArg: out, ControlOutput: []string{"bump"}, IsStateful: true},
		NodeDef: []*tfpb.NodeDef{
			ConstF32("three", nil, 3),
			{Name: "mul", Op: "Mul", Input: []string{"x", "three:output:0"}, Attr: fa},
			{Name: "bump", Op: "AssignAddVariableOp", Input: []string{"v", "x"}, Attr: map[string]*tfpb.AttrValue{"dtype": fa["T"]}},
		},
		Ret:        map[string]string{"y": "mul:z:0"},
		ControlRet: map[string]string{"bump": "bump"},
	}
	mid := &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "mid", InputArg: args, OutputArg: out, ControlOutput: []string{"call"}, IsStateful: true},
		NodeDef: []*tfpb.NodeDef{
			bodyCall("call", "StatefulPartitionedCall", "inner", []string{"x", "v"}, []wire.DataType{f, res}, []wire.DataType{f}),
			ConstF32("one", nil, 1),
			{Name: "add", Op: "AddV2", Input: []string{"call:output:0", "one:output:0"}, Attr: fa},
		},
		Ret:        map[string]string{"y": "add:z:0"},
		ControlRet: map[string]string{"call": "call"},
	}
	outer := &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "outer", InputArg: args, OutputArg: out},
		NodeDef: []*tfpb.NodeDef{
			bodyCall("pc", "PartitionedCall", "mid", []string{"x", "v"}, []wire.DataType{f, res}, []wire.DataType{f}),
			{Name: "id", Op: "Identity", Input: []string{"pc:output:0"}, Attr: fa},
		},
		Ret: map[string]string{"y": "id:output:0"},
	}
	return []*tfpb.FunctionDef{outer, mid, inner}
}

func TestNestedFunctionCalls(t *testing.T) {
	f := wire.DTFloat
	g := withLibrary(GraphDef(
		ConstF32("x", []int64{2}, 1, 2),
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
		ConstF32("ten", []int64{2}, 10, 10),
		NodeDef("init", "AssignVariableOp", In("v", "ten"), Attrs("dtype", f)),
		call("top", "outer", In("x", "v", "^init"), []wire.DataType{f, wire.DTResource}, []wire.DataType{f}, nil),
		NodeDef("read", "ReadVariableOp", In("v", "^top"), Attrs("dtype", f)),
	), nestedLibrary()...)
	out, err := Run(t, NewEnv(t), g, nil, "top:0", "read")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{4, 7}) {
		t.Fatalf("top = %v, want 3·x + 1 = [4 7]", got)
	}
	if got := Floats(&out[1]); !ApproxEqual(got, []float32{11, 12}) {
		t.Fatalf("read after top = %v, want 10 + x = [11 12]: a control output was lost", got)
	}
}

// chain is n functions f0 … f(n-1), each calling the next through a
// StatefulPartitionedCall, the last adding one to its argument.
func chain(n int) []*tfpb.FunctionDef {
	f := wire.DTFloat
	fa := map[string]*tfpb.AttrValue{"T": {Value: &tfpb.AttrValue_Type{Type: tfpb.DataType_DT_FLOAT}}}
	sig := func(i int) *tfpb.OpDef {
		return &tfpb.OpDef{Name: fmt.Sprintf("f%d", i), InputArg: []*tfpb.OpDef_ArgDef{{Name: "x", Type: tfpb.DataType_DT_FLOAT}},
			OutputArg: []*tfpb.OpDef_ArgDef{{Name: "y", Type: tfpb.DataType_DT_FLOAT}}}
	}
	fns := make([]*tfpb.FunctionDef, n)
	for i := range n - 1 {
		fns[i] = &tfpb.FunctionDef{Signature: sig(i),
			NodeDef: []*tfpb.NodeDef{bodyCall("next", "StatefulPartitionedCall", fmt.Sprintf("f%d", i+1), []string{"x"}, []wire.DataType{f}, []wire.DataType{f})},
			Ret:     map[string]string{"y": "next:output:0"}}
	}
	fns[n-1] = &tfpb.FunctionDef{Signature: sig(n - 1),
		NodeDef: []*tfpb.NodeDef{ConstF32("one", nil, 1), {Name: "add", Op: "AddV2", Input: []string{"x", "one:output:0"}, Attr: fa}},
		Ret:     map[string]string{"y": "add:z:0"}}
	return fns
}

func TestNestedCallDepth(t *testing.T) {
	f := wire.DTFloat
	graphOf := func(depth int) *tfpb.GraphDef {
		return withLibrary(GraphDef(ConstF32("x", nil, 41), call("c", "f0", In("x"), []wire.DataType{f}, []wire.DataType{f}, nil)), chain(depth)...)
	}
	// 64 nested calls are within the bound.
	out, err := Run(t, NewEnv(t), graphOf(64), nil, "c:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{42}) {
		t.Fatalf("c = %v, want 42", got)
	}
	_, err = graph.Build(graphOf(65), NewEnv(t))
	if status.CodeOf(err) != wire.InvalidArgument || !strings.Contains(err.Error(), `calls function "f64" nested 65 calls deep, over the limit of 64`) {
		t.Fatalf("65 nested calls: err = %v (code %v), want InvalidArgument naming the limit", err, status.CodeOf(err))
	}
}

func TestNestedCallsRejected(t *testing.T) {
	f := wire.DTFloat
	ping, pong := chain(2)[0], chain(2)[0]
	ping.Signature.Name = "ping"
	ping.NodeDef[0].Attr["f"].GetFunc().Name = "pong"
	pong.Signature.Name = "pong"
	pong.NodeDef[0].Attr["f"].GetFunc().Name = "ping"
	missing := chain(2)[0]
	badPort := chain(2)
	badPort[0].Ret["y"] = "next:y:0"
	x := ConstF32("x", nil, 1)
	tests := []struct {
		name string
		g    *tfpb.GraphDef
		code wire.Code
		msg  string
	}{
		{"mutual recursion through partitioned calls", withLibrary(GraphDef(x, call("c", "ping", In("x"), []wire.DataType{f}, []wire.DataType{f}, nil)), ping, pong),
			wire.InvalidArgument, `node "c/next/next" calls function "ping" recursively (ping -> pong -> ping)`},
		{"nested call of a function the library lacks", withLibrary(GraphDef(x, call("c", "f0", In("x"), []wire.DataType{f}, []wire.DataType{f}, nil)), missing),
			wire.NotFound, `node "c/next" (StatefulPartitionedCall) calls function "f1", which the library does not define`},
		{"partitioned call output other than output", withLibrary(GraphDef(x, call("c", "f0", In("x"), []wire.DataType{f}, []wire.DataType{f}, nil)), badPort...),
			wire.InvalidArgument, `StatefulPartitionedCall has no output "y"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graph.Build(tt.g, NewEnv(t))
			if status.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v (code %v), want %v containing %q", err, status.CodeOf(err), tt.code, tt.msg)
			}
		})
	}
}
