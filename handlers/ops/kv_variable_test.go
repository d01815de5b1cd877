package ops_test

import (
	"math"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

const kvDim = 2

// kvHandle is a KvVarHandleOp of int64 keys and rows of kvDim floats.
func kvHandle(name string) *tfpb.NodeDef {
	return NodeDef(name, "KvVarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "shared_name", name))
}

// kvInitGraph initializes "emb" from a default value matrix of 4 rows,
// row r all r, with filter_freq filter, and "emb/Adagrad" as its slot
// starting at 0.1, slot first, as a graph may run them.
func kvInitGraph(filter int) *tfpb.GraphDef {
	init := func(name string, inputs []string, kv ...any) *tfpb.NodeDef {
		return NodeDef(name, "InitializeKvVariableOp", inputs,
			Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64}, kv...)...))
	}
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"),
		ConstF32("default", []int64{4, kvDim}, 0, 0, 1, 1, 2, 2, 3, 3),
		ConstF32("acc_init", []int64{4, kvDim}, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
		ConstI64("empty_key", nil, -1),
		init("init_acc", In("emb/Adagrad", "emb", "acc_init", "empty_key"), "slot_index", 1, "slot_num", 1),
		init("init_emb", In("emb", "emb", "default", "empty_key", "^init_acc"), "slot_num", 1, "filter_freq", filter))
}

// kvStepGraph gathers ids, then applies grads to them at global step 7
// with a learning rate of 0.5, then gathers them again.
func kvStepGraph(ids []int64, grads []float32) *tfpb.GraphDef {
	n := int64(len(ids))
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"),
		ConstI64("ids", []int64{n}, ids...), ConstF32("dv", []int64{kvDim}),
		NodeDef("gather", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)),
		ConstF32("lr", nil, 0.5), ConstF32("grad", []int64{n, kvDim}, grads...), ConstI64("step", nil, 7),
		NodeDef("apply", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step", "^gather"),
			Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64)),
		NodeDef("after", "KvResourceGather", In("emb", "ids", "dv", "^apply"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)),
		NodeDef("inited", "KvVarIsInitializedOp", In("emb"), Attrs("Tkeys", wire.DTInt64)))
}

// kvStep runs kvStepGraph and returns the gathers before and after.
func kvStep(t *testing.T, env *ops.Env, ids []int64, grads []float32) (before, after []float32) {
	t.Helper()
	out, err := Run(t, env, kvStepGraph(ids, grads), nil, "gather", "after", "inited")
	if err != nil {
		t.Fatal(err)
	}
	if out[2].Data[0] != 1 {
		t.Fatal("KvVarIsInitializedOp says the variable is not initialized")
	}
	return Floats(&out[0]), Floats(&out[1])
}

// TestKvVariable runs DeepRec's ops: rows made on first lookup from the
// default value matrix (id mod its rows), Adagrad on them with the slot
// initialized before its primary, duplicates applied in turn.
func TestKvVariable(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	ids := []int64{5, 2, 5}
	grads := []float32{1, -1, 0.5, 0.5, 2, 0}
	before, after := kvStep(t, env, ids, grads)
	if !ApproxEqual(before, []float32{1, 1, 2, 2, 1, 1}) {
		t.Fatalf("first gather %v, want rows 5%%4 and 2%%4 of the default values", before)
	}
	// Reference: SparseApplyAdagrad, one id after another.
	vals := map[int64][]float64{5: {1, 1}, 2: {2, 2}}
	accs := map[int64][]float64{5: {0.1, 0.1}, 2: {0.1, 0.1}}
	for i, id := range ids {
		for j := range kvDim {
			g := float64(grads[i*kvDim+j])
			accs[id][j] += g * g
			vals[id][j] -= 0.5 * g / math.Sqrt(accs[id][j])
		}
	}
	var want []float32
	for _, id := range ids {
		want = append(want, float32(vals[id][0]), float32(vals[id][1]))
	}
	if !ApproxEqual(after, want) {
		t.Fatalf("after Adagrad %v, want %v", after, want)
	}
}

// TestKvVariableFilter checks filter_freq through the ops: the first
// lookup answers the default value and its gradient is dropped; the
// second makes the row.
func TestKvVariableFilter(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(2), nil); err != nil {
		t.Fatal(err)
	}
	_, after := kvStep(t, env, []int64{3}, []float32{1, 1})
	if !ApproxEqual(after, []float32{3, 3}) {
		t.Fatalf("after a dropped gradient %v, want the default [3 3]", after)
	}
	before, after := kvStep(t, env, []int64{3}, []float32{1, 1})
	want := float32(3 - 0.5/math.Sqrt(1.1))
	if !ApproxEqual(before, []float32{3, 3}) || !ApproxEqual(after, []float32{want, want}) {
		t.Fatalf("second step: %v then %v, want [3 3] then [%v %v]", before, after, want, want)
	}
}

// TestKvVariableErrors checks the ops' refusals.
func TestKvVariableErrors(t *testing.T) {
	gather := func(v string) []*tfpb.NodeDef {
		return []*tfpb.NodeDef{kvHandle(v), ConstI64("ids", []int64{1}, 1), ConstF32("dv", []int64{kvDim}),
			NodeDef("out", "KvResourceGather", In(v, "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64))}
	}
	runErrCases(t, []errCase{
		{"gather before initialization", gather("emb"), wire.FailedPrecondition, "embedding variable /emb is not initialized"},
		{"accumulator of another variable", append(kvInitGraph(0).Node, kvHandle("other"), ConstF32("v2", []int64{1, kvDim}), ConstI64("ek2", nil, -1),
			NodeDef("init_other", "InitializeKvVariableOp", In("other", "other", "v2", "ek2"), Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64)),
			ConstF32("lr", nil, 0.5), ConstF32("grad", []int64{1, kvDim}), ConstI64("ids", []int64{1}, 1), ConstI64("step", nil, 1),
			NodeDef("out", "KvResourceSparseApplyAdagrad", In("other", "emb/Adagrad", "lr", "grad", "ids", "step", "^init_emb", "^init_other"),
				Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64))),
			wire.InvalidArgument, "accumulator /emb/Adagrad is not a slot of embedding variable /other"},
		{"default values of another width", []*tfpb.NodeDef{kvHandle("emb"), ConstF32("v", []int64{1, 3}), ConstI64("ek", nil, -1),
			NodeDef("out", "InitializeKvVariableOp", In("emb", "emb", "v", "ek"), Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64))},
			wire.InvalidArgument, "default values [1,3], want [default_value_dim, 2]"},
	})
	// A slot initialized after its primary has rows would change rows made
	// already: refused.
	env := NewEnv(t)
	g := kvInitGraph(0)
	g.Node = g.Node[:len(g.Node)-2] // handles, constants; no inits
	g.Node = append(g.Node, NodeDef("init_emb", "InitializeKvVariableOp", In("emb", "emb", "default", "empty_key"),
		Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64, "slot_num", 1)))
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t, env, GraphDef(gather("emb")...), nil); err != nil {
		t.Fatal(err)
	}
	late := GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"), ConstF32("acc_init", []int64{1, kvDim}, 0.1, 0.1), ConstI64("empty_key", nil, -1),
		NodeDef("init_acc", "InitializeKvVariableOp", In("emb/Adagrad", "emb", "acc_init", "empty_key"),
			Attrs("dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64, "slot_index", 1, "slot_num", 1)))
	if _, err := Run(t, env, late, nil); status.CodeOf(err) != wire.FailedPrecondition {
		t.Fatalf("a slot initialized after rows: %v, want FailedPrecondition", err)
	}
}
