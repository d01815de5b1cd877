package ops_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// kvSaveGraph saves "emb" and its slot "emb/Adagrad" under prefix as a
// DeepRec Saver's SaveV2 does: the global step first (has_ev), then the
// variables' handles, each under its checkpoint name. A negative step
// saves no global step.
func kvSaveGraph(prefix string, step int64, names ...string) *tfpb.GraphDef {
	if len(names) == 0 {
		names = []string{"emb", "emb/Adagrad"}
	}
	nodes := []*tfpb.NodeDef{kvHandle("emb"), kvHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix)}
	inputs := In("prefix", "names", "slices")
	dtypes := []wire.DataType{wire.DTResource, wire.DTResource}
	if step >= 0 {
		nodes = append(nodes, ConstI64("step", nil, step))
		inputs = append(inputs, "step")
		names = append([]string{"global_step"}, names...)
		dtypes = append([]wire.DataType{wire.DTInt64}, dtypes...)
	}
	n := int64(len(names))
	nodes = append(nodes, ConstStrList("names", []int64{n}, names...), ConstStr("slices", []int64{n}, make([]string, n)...))
	return GraphDef(append(nodes, NodeDef("save", "SaveV2", append(inputs, "emb", "emb/Adagrad"),
		Attrs("dtypes", dtypes, "has_ev", step >= 0)))...)
}

// kvImportGraph restores "emb" and "emb/Adagrad" from prefix, saved under
// names, as partition id of num; with slotFirst the slot's import runs
// before its primary's.
func kvImportGraph(prefix string, id, num int, slotFirst bool, names ...string) *tfpb.GraphDef {
	if len(names) == 0 {
		names = []string{"emb", "emb/Adagrad"}
	}
	imp := func(node, self, value, name string, deps []string, kv ...any) *tfpb.NodeDef {
		return NodeDef(node, "KvResourceImportV2", append(In("prefix", self, "emb", value, name, "empty_key"), deps...),
			Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64,
				"slot_num", 1, "partition_id", id, "partition_num", num}, kv...)...))
	}
	var embDeps, slotDeps []string
	if slotFirst {
		embDeps = []string{"^import_slot"}
	} else {
		slotDeps = []string{"^import_emb"}
	}
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstF32("default", []int64{4, kvDim}, 0, 0, 1, 1, 2, 2, 3, 3), ConstI64("empty_key", nil, -1),
		ConstF32("acc_init", []int64{1, kvDim}, 0.1, 0.1),
		ConstStrList("name_emb", nil, names[0]), ConstStrList("name_slot", nil, names[1]),
		imp("import_slot", "emb/Adagrad", "acc_init", "name_slot", slotDeps, "slot_index", 1),
		imp("import_emb", "emb", "default", "name_emb", embDeps))
}

// kvRows exports "emb" and its slot and returns each row's value and
// accumulator, with its version and freq, by id.
func kvRows(t *testing.T, env *ops.Env) map[int64][2*kvDim + 2]float64 {
	t.Helper()
	attrs := Attrs("Tkeys", wire.DTInt64, "Tvalues", wire.DTFloat)
	g := GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"),
		NodeDef("x", "KvResourceExport", In("emb"), attrs), NodeDef("s", "KvResourceExport", In("emb/Adagrad"), attrs))
	out, err := Run(t, env, g, nil, "x", "x:1", "x:2", "x:3", "s", "s:1")
	if err != nil {
		t.Fatal(err)
	}
	keys, vals, vers, freqs := tensor.View[int64](out[0].Data), Floats(&out[1]), tensor.View[int64](out[2].Data), tensor.View[int64](out[3].Data)
	skeys, svals := tensor.View[int64](out[4].Data), Floats(&out[5])
	if !slices.Equal(keys, skeys) {
		t.Fatalf("the slot's keys %v are not the primary's %v", skeys, keys)
	}
	rows := map[int64][2*kvDim + 2]float64{}
	for i, id := range keys {
		var r [2*kvDim + 2]float64
		for j := range kvDim {
			r[j], r[kvDim+j] = float64(vals[i*kvDim+j]), float64(svals[i*kvDim+j])
		}
		r[2*kvDim], r[2*kvDim+1] = float64(vers[i]), float64(freqs[i])
		rows[id] = r
	}
	return rows
}

// kvTrained returns an env whose "emb" was trained on ids 0..n-1 (ids
// below 0 too), a few steps each.
func kvTrained(t *testing.T, n int) *ops.Env {
	t.Helper()
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, n)
	grads := make([]float32, n*kvDim)
	for i := range ids {
		ids[i] = int64(i*7919) - int64(n/2)
		grads[i*kvDim], grads[i*kvDim+1] = float32(i%5)*0.1, -0.2
	}
	kvStep(t, env, ids, grads)
	kvStep(t, env, ids[:n/2], grads[:n/2*kvDim])
	return env
}

// TestKvSaveRestore saves an embedding variable and its slot through
// SaveV2, checks the tensors under DeepRec's names, and restores them
// through KvResourceImportV2 into a fresh ps, the slot's import before
// and after its primary's.
func TestKvSaveRestore(t *testing.T) {
	src := kvTrained(t, 300)
	want := kvRows(t, src)
	if _, err := Run(t, src, kvSaveGraph("model.ckpt-7", 7), nil); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(src.CheckpointDir + "/model.ckpt-7")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"emb", "emb/Adagrad"} {
		for suffix, shape := range map[string][]int64{"-keys": {300}, "-values": {300, kvDim}, "-freqs": {300}, "-versions": {300},
			"-partition_offset": {1001}, "-keys_filtered": {0}, "-freqs_filtered": {0}, "-partition_filter_offset": {1001}} {
			if e, ok := r.Entry(name + suffix); !ok || !slices.Equal(e.Shape, shape) {
				t.Fatalf("tensor %s%s: %v, want shape %v", name, suffix, e.Shape, shape)
			}
		}
	}
	if _, ok := r.Entry("global_step"); !ok {
		t.Fatal("the global step was not saved")
	}
	for _, slotFirst := range []bool{false, true} {
		dst := envIn(t, src.CheckpointDir)
		if _, err := Run(t, dst, kvImportGraph("model.ckpt-7", 0, 1, slotFirst), nil); err != nil {
			t.Fatal(err)
		}
		if got := kvRows(t, dst); !maps2Equal(got, want) {
			t.Fatalf("slot first %v: restored %d rows, want %d, or rows differ", slotFirst, len(got), len(want))
		}
	}
}

func maps2Equal[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestKvRepartition saves a variable from two ps (two pieces, as a
// partitioned variable's emb/part_0 and emb/part_1) and restores it into
// one ps and into three: every row lands once, in partition
// embedding.PartitionOf(id, n), with its slot.
func TestKvRepartition(t *testing.T) {
	dir := t.TempDir()
	want := map[int64][2*kvDim + 2]float64{}
	var prefixes []string
	for piece := range 2 {
		src := envIn(t, dir)
		if _, err := Run(t, src, kvInitGraph(0), nil); err != nil {
			t.Fatal(err)
		}
		var ids []int64
		var grads []float32
		for i := range 400 {
			if id := int64(i*31 - 100); embedding.PartitionOf(id, 2) == piece {
				ids = append(ids, id)
				grads = append(grads, float32(i)*0.01, 0.5)
			}
		}
		kvStep(t, src, ids, grads)
		for id, r := range kvRows(t, src) {
			want[id] = r
		}
		prefix := fmt.Sprintf("model_temp/part-%05d-of-00002", piece)
		names := []string{fmt.Sprintf("emb/part_%d", piece), fmt.Sprintf("emb/part_%d/Adagrad", piece)}
		if _, err := Run(t, src, kvSaveGraph(prefix, int64(piece)-1, names...), nil); err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, dir+"/"+prefix)
	}
	if err := checkpoint.Merge(prefixes, dir+"/model", true); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		got := map[int64][2*kvDim + 2]float64{}
		for k := range n {
			dst := envIn(t, dir)
			// A slot of a piece is named after its piece: emb/part_k/Adagrad.
			names := []string{fmt.Sprintf("emb/part_%d", k), fmt.Sprintf("emb/part_%d/Adagrad", k)}
			if _, err := Run(t, dst, kvImportGraph("model", k, n, false, names...), nil); err != nil {
				t.Fatal(err)
			}
			for id, r := range kvRows(t, dst) {
				if embedding.PartitionOf(id, n) != k {
					t.Fatalf("%d ps: row %d restored into partition %d, belongs in %d", n, id, k, embedding.PartitionOf(id, n))
				}
				got[id] = r
			}
		}
		if !maps2Equal(got, want) {
			t.Fatalf("%d ps: %d rows restored, want %d, or rows differ", n, len(got), len(want))
		}
	}
}

// TestKvSaveEvicts checks eviction at save: with steps_to_live, rows not
// updated within it of the global step SaveV2 is given are not saved.
func TestKvSaveEvicts(t *testing.T) {
	env := NewEnv(t)
	g := kvInitGraph(0)
	for _, n := range g.Node {
		if n.Name == "init_emb" {
			n.Attr["steps_to_live"] = Attrs("x", 5)["x"]
		}
	}
	if _, err := Run(t, env, g, nil); err != nil {
		t.Fatal(err)
	}
	kvStep(t, env, []int64{1, 2}, []float32{1, 1, 1, 1}) // at step 7
	gather := GraphDef(kvHandle("emb"), ConstI64("ids", []int64{1}, 3), ConstF32("dv", []int64{kvDim}),
		NodeDef("g", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)))
	if _, err := Run(t, env, gather, nil); err != nil { // row 3, version 0
		t.Fatal(err)
	}
	if _, err := Run(t, env, kvSaveGraph("ckpt", 12), nil); err != nil {
		t.Fatal(err)
	}
	got := kvRows(t, env)
	if _, ok := got[3]; ok || len(got) != 2 {
		t.Fatalf("after a save at step 12 with steps_to_live 5: rows %v, want 1 and 2 (row 3 never updated)", got)
	}
}

// TestKvImportRefusals checks KvResourceImportV2's refusals of checkpoints
// that do not fit the variable, each naming the variable and the tensor,
// and that a refused import leaves nothing half restored serving.
func TestKvImportRefusals(t *testing.T) {
	src := kvTrained(t, 50)
	if _, err := Run(t, src, kvSaveGraph("good", 3), nil); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(src.CheckpointDir + "/good")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// spoil writes a checkpoint of good's tensors with one replaced.
	spoil := func(prefix, name string, t2 *wire.Tensor) {
		w, err := checkpoint.NewWriter(src.CheckpointDir+"/"+prefix, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range r.Entries() {
			x, err := r.Read(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			if e.Name == name {
				x = *t2
			}
			if err := w.Add(e.Name, &x); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	short := I64([]int64{49}, make([]int64, 49)...)
	i32keys := I32([]int64{50}, make([]int32, 50)...)
	wide := F32([]int64{50, 3}, make([]float32, 150)...)
	otherKeys := I64([]int64{50}, func() []int64 {
		k := make([]int64, 50)
		for i := range k {
			k[i] = int64(1_000_000 + i*1000) // all in part 0
		}
		return k
	}()...)
	badOffsets := I32([]int64{1001}, make([]int32, 1001)...)
	fewValues := F32([]int64{49, kvDim}, make([]float32, 49*kvDim)...)
	shortVersions := I64([]int64{10}, make([]int64, 10)...)
	spoil("few_values", "emb-values", &fewValues)
	spoil("short_versions", "emb/Adagrad-versions", &shortVersions)
	spoil("short_freqs", "emb-freqs", &short)
	spoil("int32_keys", "emb-keys", &i32keys)
	spoil("wide_values", "emb-values", &wide)
	spoil("slot_keys", "emb/Adagrad-keys", &otherKeys)
	spoil("bad_offsets", "emb-partition_offset", &badOffsets)
	cases := []struct{ prefix, msg string }{
		{"short_freqs", `embedding variable /emb: checkpoint short_freqs: tensor "emb-freqs" holds 49 elements for 50 keys`},
		{"int32_keys", `embedding variable /emb: checkpoint int32_keys: tensor "emb-keys" is int32, want int64`},
		{"wide_values", `embedding variable /emb: checkpoint wide_values: tensor "emb-values" is [50,3], want [50,2]`},
		{"slot_keys", "embedding variable /emb/Adagrad: checkpoint slot_keys:"},
		{"few_values", `embedding variable /emb: checkpoint few_values: tensor "emb-values" is [49,2], want [50,2] for 50 keys`},
		{"short_versions", `embedding variable /emb/Adagrad: checkpoint short_versions: tensor "emb/Adagrad-versions" holds 10 elements for 50 keys`},
		{"bad_offsets", `embedding variable /emb: checkpoint bad_offsets: "emb": embedding: partition_offset runs from 0 to 0 over 50 rows`},
	}
	for _, tc := range cases {
		for _, slotFirst := range []bool{false, true} {
			dst := envIn(t, src.CheckpointDir)
			_, err := Run(t, dst, kvImportGraph(tc.prefix, 0, 1, slotFirst), nil)
			if status.CodeOf(err) != wire.InvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("%s (slot first %v): %v, want InvalidArgument containing %q", tc.prefix, slotFirst, err, tc.msg)
			}
			export := GraphDef(kvHandle("emb"), NodeDef("x", "KvResourceExport", In("emb"), Attrs("Tkeys", wire.DTInt64, "Tvalues", wire.DTFloat)))
			if _, err := Run(t, dst, export, nil); status.CodeOf(err) != wire.FailedPrecondition {
				t.Fatalf("%s (slot first %v): after a refused import, export: %v, want FailedPrecondition", tc.prefix, slotFirst, err)
			}
			// The same ps restores a good checkpoint after.
			if _, err := Run(t, dst, kvImportGraph("good", 0, 1, slotFirst), nil); err != nil {
				t.Fatalf("%s: a good import after a refused one: %v", tc.prefix, err)
			}
		}
	}
}
