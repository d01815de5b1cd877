package ops_test

import (
	"math"
	"slices"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

var adamVars = []string{"emb", "emb/Adam", "emb/Adam_1"}

// kvAdamInit initializes "emb" with Adam's two slots, m and v, at 0, as
// DeepRec's Adam makes them (the slots first). With importFrom, they are
// imported from that checkpoint instead.
func kvAdamInit(importFrom string) *tfpb.GraphDef {
	attrs := func(kv ...any) map[string]*tfpb.AttrValue {
		return Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64, "slot_num", 2}, kv...)...)
	}
	nodes := []*tfpb.NodeDef{kvHandle("emb"), kvHandle("emb/Adam"), kvHandle("emb/Adam_1"),
		ConstF32("default", []int64{1, kvDim}, 0.5, 0.5), ConstF32("zeros", []int64{1, kvDim}, 0, 0), ConstI64("empty_key", nil, -1),
		ConstStrList("prefix", nil, importFrom)}
	for i, v := range adamVars {
		value, kv := "zeros", []any{"slot_index", i}
		if i == 0 {
			value, kv = "default", nil
		}
		if importFrom == "" {
			nodes = append(nodes, NodeDef("init_"+v, "InitializeKvVariableOp", In(v, "emb", value, "empty_key"), attrs(kv...)))
			continue
		}
		nodes = append(nodes, ConstStrList("name_"+v, nil, v),
			NodeDef("import_"+v, "KvResourceImportV2", In("prefix", v, "emb", value, "name_"+v, "empty_key"), attrs(kv...)))
	}
	if importFrom == "" { // slots before their primary
		nodes[len(nodes)-3].Input = append(nodes[len(nodes)-3].Input, "^init_emb/Adam", "^init_emb/Adam_1")
	}
	return GraphDef(nodes...)
}

// kvAdamStep gathers ids and applies Adam's step'th update to them.
func kvAdamStep(t *testing.T, env *ops.Env, step int, ids []int64, grads []float32) {
	t.Helper()
	b1p, b2p := float32(math.Pow(0.9, float64(step))), float32(math.Pow(0.999, float64(step)))
	n := int64(len(ids))
	g := GraphDef(kvHandle("emb"), kvHandle("emb/Adam"), kvHandle("emb/Adam_1"),
		ConstI64("ids", []int64{n}, ids...), ConstF32("dv", []int64{kvDim}),
		NodeDef("gather", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)),
		ConstF32("b1p", nil, b1p), ConstF32("b2p", nil, b2p), ConstF32("lr", nil, 0.01), ConstF32("b1", nil, 0.9),
		ConstF32("b2", nil, 0.999), ConstF32("eps", nil, 1e-8), ConstF32("grad", []int64{n, kvDim}, grads...),
		ConstI64("step", nil, int64(step)), ConstF32("wd", nil, 0),
		NodeDef("apply", "KvResourceSparseApplyAdam", In("emb", "emb/Adam", "emb/Adam_1", "b1p", "b2p", "lr", "b1", "b2", "eps", "grad", "ids", "step", "wd", "^gather"),
			Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64)))
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
}

// kvAdamRows exports the value, m and v of every row, by id.
func kvAdamRows(t *testing.T, env *ops.Env) map[int64][3 * kvDim]float32 {
	t.Helper()
	nodes := []*tfpb.NodeDef{kvHandle("emb"), kvHandle("emb/Adam"), kvHandle("emb/Adam_1")}
	var fetch []string
	for i, v := range adamVars {
		x := string(rune('a' + i))
		nodes = append(nodes, NodeDef(x, "KvResourceExport", In(v), Attrs("Tkeys", wire.DTInt64, "Tvalues", wire.DTFloat)))
		fetch = append(fetch, x, x+":1")
	}
	out, err := Run(t, env, GraphDef(nodes...), nil, fetch...)
	if err != nil {
		t.Fatal(err)
	}
	keys := tensor.View[int64](out[0].Data)
	rows := map[int64][3 * kvDim]float32{}
	for i, id := range keys {
		var r [3 * kvDim]float32
		for s := range 3 {
			if !slices.Equal(tensor.View[int64](out[2*s].Data), keys) {
				t.Fatalf("%s's keys are not emb's", adamVars[s])
			}
			copy(r[s*kvDim:], Floats(&out[2*s+1])[i*kvDim:(i+1)*kvDim])
		}
		rows[id] = r
	}
	return rows
}

// TestKvAdam runs DeepRec's Adam on an embedding variable: the moments
// live beside each row (a row made at step 2 starts them at 0), are
// saved with it and restored, and training goes on from the restore as
// it would have without it.
func TestKvAdam(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, kvAdamInit(""), nil); err != nil {
		t.Fatal(err)
	}
	kvAdamStep(t, env, 1, []int64{4, 8}, []float32{1, -1, 0.5, 2})
	kvAdamStep(t, env, 2, []int64{4, 12}, []float32{0.25, 1, -3, 1})
	rows := kvAdamRows(t, env)
	// Row 12, made at step 2: m = 0.1 g, v = 0.001 g², value moves by
	// lr * sqrt(1-0.999²)/(1-0.9²) * m/(sqrt v + eps).
	lrt := 0.01 * math.Sqrt(1-0.999*0.999) / (1 - 0.81)
	for j, g := range []float64{-3, 1} {
		m, v := 0.1*g, 0.001*g*g
		want := []float64{0.5 - lrt*m/(math.Sqrt(v)+1e-8), m, v}
		for s, w := range want {
			if got := float64(rows[12][s*kvDim+j]); math.Abs(got-w) > 1e-6 {
				t.Fatalf("row 12 element %d: value, m, v %v; want %v", j, rows[12], want)
			}
		}
	}
	save := GraphDef(kvHandle("emb"), kvHandle("emb/Adam"), kvHandle("emb/Adam_1"), ConstStrList("prefix", nil, "adam"),
		ConstStrList("names", []int64{3}, adamVars...), ConstStr("slices", []int64{3}, "", "", ""),
		NodeDef("save", "SaveV2", In("prefix", "names", "slices", "emb", "emb/Adam", "emb/Adam_1"),
			Attrs("dtypes", []wire.DataType{wire.DTResource, wire.DTResource, wire.DTResource})))
	if _, err := Run(t, env, save, nil); err != nil {
		t.Fatal(err)
	}
	dst := envIn(t, env.CheckpointDir)
	if _, err := Run(t, dst, kvAdamInit("adam"), nil); err != nil {
		t.Fatal(err)
	}
	if got := kvAdamRows(t, dst); !maps2Equal(got, rows) {
		t.Fatalf("restored %v, want %v", got, rows)
	}
	for _, e := range []*ops.Env{env, dst} {
		kvAdamStep(t, e, 3, []int64{8, 12, 16}, []float32{1, 1, 1, 1, 1, 1})
	}
	if a, b := kvAdamRows(t, env), kvAdamRows(t, dst); !maps2Equal(a, b) {
		t.Fatalf("a step after the restore gave %v, without it %v", b, a)
	}
}
