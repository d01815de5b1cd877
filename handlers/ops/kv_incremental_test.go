package ops_test

import (
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// kvStepAt runs a gather (making the rows) and an Adagrad step on ids at
// global step step.
func kvStepAt(t *testing.T, env *ops.Env, ids []int64, step int64) {
	t.Helper()
	n := int64(len(ids))
	grads := make([]float32, n*kvDim)
	for i := range grads {
		grads[i] = float32(i%7)*0.1 - 0.3
	}
	g := GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"),
		ConstI64("ids", []int64{n}, ids...), ConstF32("dv", []int64{kvDim}),
		NodeDef("gather", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)),
		ConstF32("lr", nil, 0.5), ConstF32("grad", []int64{n, kvDim}, grads...), ConstI64("step", nil, step),
		NodeDef("apply", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step", "^gather"),
			Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64)))
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
}

// incrSaveGraph saves the rows of "emb" and its slot changed since since
// under prefix, an increment of base following prev, with the global
// step in full.
func incrSaveGraph(prefix, base, prev string, since, step int64) *tfpb.GraphDef {
	names := []string{"global_step", "emb", "emb/Adagrad"}
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstStrList("names", []int64{3}, names...), ConstStr("slices", []int64{3}, "", "", ""),
		ConstStrList("base", nil, base), ConstStrList("prev", nil, prev), ConstI64("since", nil, since), ConstI64("step", nil, step),
		NodeDef("save", "IncrSave", In("prefix", "names", "slices", "base", "prev", "since", "step", "emb", "emb/Adagrad"),
			Attrs("dtypes", []wire.DataType{wire.DTInt64, wire.DTResource, wire.DTResource})))
}

// incrImportGraph applies the increment under prefix to "emb" and its
// slot, as partition id of num: the slot's import first.
func incrImportGraph(prefix string, id, num int) *tfpb.GraphDef {
	imp := func(node, self string, deps ...string) *tfpb.NodeDef {
		return NodeDef(node, "KvResourceIncrImport", append(In("prefix", self, "emb", "name_"+self), deps...),
			Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64, "partition_id", id, "partition_num", num))
	}
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstStrList("name_emb", nil, "emb"), ConstStrList("name_emb/Adagrad", nil, "emb/Adagrad"),
		imp("import_slot", "emb/Adagrad"), imp("import_emb", "emb", "^import_slot"))
}

// TestKvIncremental trains, saves a full checkpoint at step 10 and two
// increments (steps 20 and 30) of the rows touched in between, and
// restores the full checkpoint and both increments into a fresh ps: every
// row, value, slot, version and count, is the source's. Each increment
// holds the rows it changed alone.
func TestKvIncremental(t *testing.T) {
	dir := t.TempDir()
	src := envIn(t, dir)
	if _, err := Run(t, src, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 500)
	for i := range ids {
		ids[i] = int64(i*7919) - 1000
	}
	kvStepAt(t, src, ids, 5)
	if _, err := Run(t, src, kvSaveGraph("model.ckpt-10", 10), nil); err != nil {
		t.Fatal(err)
	}
	kvStepAt(t, src, append(ids[:20:20], 1<<40, 1<<41), 15) // 20 old rows, 2 new
	if _, err := Run(t, src, incrSaveGraph(".incremental_checkpoint/incr-model.ckpt-20", "model.ckpt-10", "model.ckpt-10", 10, 20), nil); err != nil {
		t.Fatal(err)
	}
	kvStepAt(t, src, ids[10:40], 25)
	if _, err := Run(t, src, incrSaveGraph(".incremental_checkpoint/incr-model.ckpt-30", "model.ckpt-10", "incr-model.ckpt-20", 20, 30), nil); err != nil {
		t.Fatal(err)
	}
	want := kvRows(t, src)
	for prefix, n := range map[string]int64{"incr-model.ckpt-20": 22, "incr-model.ckpt-30": 30} {
		r, err := checkpoint.Open(dir + "/.incremental_checkpoint/" + prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"emb-keys", "emb/Adagrad-keys"} {
			if e, ok := r.Entry(name); !ok || len(e.Shape) != 1 || e.Shape[0] != n {
				t.Errorf("%s: %s %v, want the %d rows changed", prefix, name, e.Shape, n)
			}
		}
		if _, ok := r.Entry("global_step"); !ok {
			t.Errorf("%s: no global_step: dense tensors are saved in full", prefix)
		}
		r.Close()
	}

	dst := envIn(t, dir)
	if _, err := Run(t, dst, kvImportGraph("model.ckpt-10", 0, 1, false), nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"incr-model.ckpt-20", "incr-model.ckpt-30"} {
		if _, err := Run(t, dst, incrImportGraph(".incremental_checkpoint/"+p, 0, 1), nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := kvRows(t, dst); !maps2Equal(got, want) {
		t.Fatalf("restored full + increments: %d rows, want %d, or rows differ", len(got), len(want))
	}

	// Repartitioned into two ps, each takes its own rows of each.
	got := map[int64][2*kvDim + 2]float64{}
	for part := range 2 {
		ps := envIn(t, dir)
		if _, err := Run(t, ps, kvImportGraph("model.ckpt-10", part, 2, false), nil); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"incr-model.ckpt-20", "incr-model.ckpt-30"} {
			if _, err := Run(t, ps, incrImportGraph(".incremental_checkpoint/"+p, part, 2), nil); err != nil {
				t.Fatal(err)
			}
		}
		for id, r := range kvRows(t, ps) {
			got[id] = r
		}
	}
	if !maps2Equal(got, want) {
		t.Fatalf("restored into two ps: %d rows, want %d, or rows differ", len(got), len(want))
	}
}

// TestKvIncrementalRefused applies increments out of order, twice, onto
// another base, and onto a variable never restored: each is refused with
// FailedPrecondition and leaves the rows as they were.
func TestKvIncrementalRefused(t *testing.T) {
	dir := t.TempDir()
	src := envIn(t, dir)
	if _, err := Run(t, src, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	kvStepAt(t, src, ids, 5)
	for _, p := range []string{"model.ckpt-10", "model.ckpt-11"} {
		if _, err := Run(t, src, kvSaveGraph(p, 10), nil); err != nil {
			t.Fatal(err)
		}
	}
	kvStepAt(t, src, ids[:3], 15)
	if _, err := Run(t, src, incrSaveGraph("incr-model.ckpt-20", "model.ckpt-10", "model.ckpt-10", 10, 20), nil); err != nil {
		t.Fatal(err)
	}
	kvStepAt(t, src, ids[3:5], 25)
	if _, err := Run(t, src, incrSaveGraph("incr-model.ckpt-30", "model.ckpt-10", "incr-model.ckpt-20", 20, 30), nil); err != nil {
		t.Fatal(err)
	}

	restored := func(full string) *ops.Env {
		env := envIn(t, dir)
		if _, err := Run(t, env, kvImportGraph(full, 0, 1, false), nil); err != nil {
			t.Fatal(err)
		}
		return env
	}
	refused := func(env *ops.Env, prefix, what string) {
		t.Helper()
		before := kvRows(t, env)
		_, err := Run(t, env, incrImportGraph(prefix, 0, 1), nil)
		if status.CodeOf(err) != wire.FailedPrecondition {
			t.Fatalf("%s: %v, want FailedPrecondition", what, err)
		}
		if !maps2Equal(kvRows(t, env), before) {
			t.Fatalf("%s: the refused increment changed rows", what)
		}
	}
	refused(restored("model.ckpt-10"), "incr-model.ckpt-30", "the second increment before the first")
	refused(restored("model.ckpt-11"), "incr-model.ckpt-20", "an increment of another base")
	twice := restored("model.ckpt-10")
	if _, err := Run(t, twice, incrImportGraph("incr-model.ckpt-20", 0, 1), nil); err != nil {
		t.Fatal(err)
	}
	refused(twice, "incr-model.ckpt-20", "an increment applied twice")
	fresh := envIn(t, dir)
	if _, err := Run(t, fresh, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	kvStepAt(t, fresh, ids, 5)
	refused(fresh, "incr-model.ckpt-20", "an increment onto a variable not restored")

	// A full checkpoint is not an increment.
	env := restored("model.ckpt-10")
	if _, err := Run(t, env, incrImportGraph("model.ckpt-11", 0, 1), nil); status.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("a full checkpoint applied as an increment: %v, want InvalidArgument", err)
	}
}
