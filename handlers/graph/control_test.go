package graph_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// condGraph is tf.cond(p, lambda: x, lambda: -x) as TensorFlow 1.x
// writes it, with a variable assigned only in the true branch (through a
// control edge from it, as a branch's side effects hang off its pivot)
// and a node after the false branch's pivot.
func condGraph() *tfpb.GraphDef {
	f := wire.DTFloat
	return GraphDef(
		NodeDef("p", "Placeholder", nil, Attrs("dtype", wire.DTBool)),
		ConstF32("x", nil, 1),
		NodeDef("sw", "Switch", In("x", "p"), Attrs("T", f)),
		NodeDef("pivot_t", "Identity", In("sw:1"), Attrs("T", f)),
		NodeDef("pivot_f", "Identity", In("sw:0"), Attrs("T", f)),
		NodeDef("neg", "Neg", In("pivot_f"), Attrs("T", f)),
		NodeDef("m", "Merge", In("neg", "pivot_t"), Attrs("T", f, "N", 2)),
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{}, "shared_name", "v", "container", "")),
		ConstF32("seven", nil, 7),
		NodeDef("assign", "AssignVariableOp", In("v", "seven", "^pivot_t"), Attrs("dtype", f)),
		NodeDef("after_f", "Identity", In("x", "^pivot_f"), Attrs("T", f)),
	)
}

// initedGraph reads whether condGraph's variable was assigned.
func initedGraph() *tfpb.GraphDef {
	return GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{}, "shared_name", "v", "container", "")),
		NodeDef("inited", "VarIsInitializedOp", In("v"), nil))
}

func boolTensor(b bool) wire.Tensor {
	v := byte(0)
	if b {
		v = 1
	}
	return Of(wire.DTBool, nil, []uint8{v})
}

func TestCondRunsOneBranch(t *testing.T) {
	for _, pred := range []bool{true, false} {
		env := NewEnv(t)
		out, err := Run(t, env, condGraph(), map[string]wire.Tensor{"p": boolTensor(pred)},
			"m:0", "m:1", "after_f:0", "neg:0")
		if err != nil {
			t.Fatalf("pred %v: %v", pred, err)
		}
		want, index := float32(1), int32(1)
		if !pred {
			want, index = -1, 0
		}
		if got := tensor.View[float32](out[0].Data); out[0].Dead || len(got) != 1 || got[0] != want {
			t.Errorf("pred %v: merge output %v (dead %v), want %v", pred, got, out[0].Dead, want)
		}
		if got := tensor.View[int32](out[1].Data); len(got) != 1 || got[0] != index {
			t.Errorf("pred %v: value_index %v, want %d", pred, got, index)
		}
		// A node with a control input from the branch not taken is dead,
		// as is every node of that branch; what the true branch assigns is
		// assigned only when it is taken.
		if out[2].Dead != pred || out[3].Dead != pred {
			t.Errorf("pred %v: after_f dead %v, neg dead %v; want both %v", pred, out[2].Dead, out[3].Dead, pred)
		}
		inited, err := Run(t, env, initedGraph(), nil, "inited:0")
		if err != nil {
			t.Fatal(err)
		}
		if got := inited[0].Data[0] != 0; got != pred {
			t.Errorf("pred %v: variable initialized %v, want %v", pred, got, pred)
		}
	}
}

func TestSwitchWantsScalarBoolPredicate(t *testing.T) {
	f := wire.DTFloat
	g := GraphDef(ConstF32("x", nil, 1), NodeDef("p", "Placeholder", nil, Attrs("dtype", f)),
		NodeDef("sw", "Switch", In("x", "p"), Attrs("T", f)))
	if _, err := Run(t, NewEnv(t), g, map[string]wire.Tensor{"p": F32(nil, 1)}, "sw:0"); err == nil {
		t.Fatal("Switch with a float predicate ran")
	}
	g = GraphDef(ConstF32("x", nil, 1), NodeDef("p", "Placeholder", nil, Attrs("dtype", wire.DTBool)),
		NodeDef("sw", "Switch", In("x", "p"), Attrs("T", f)))
	if _, err := Run(t, NewEnv(t), g, map[string]wire.Tensor{"p": Of(wire.DTBool, []int64{2}, []uint8{1, 0})}, "sw:0"); err == nil {
		t.Fatal("Switch with a vector predicate ran")
	}
}
