package ops_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

const benchDim = 16

// kvBenchRows sizes BenchmarkKvIncrement's variable: 1M by default, as
// the benchmark also runs once in CI; BENCHMARKS.md has 10M too.
var kvBenchRows = flag.Int("kv_bench_rows", 1<<20, "rows of BenchmarkKvIncrement's embedding variable")

// rowsName is how a benchmark's name gives its rows: 1M, 10M, 1048577.
func rowsName(rows int) string {
	switch {
	case rows == 1<<20:
		return "1M"
	case rows%1_000_000 == 0:
		return fmt.Sprintf("%dM", rows/1_000_000)
	}
	return strconv.Itoa(rows)
}

func benchHandle(name string) *tfpb.NodeDef {
	return NodeDef(name, "KvVarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", []int64{benchDim}, "Tkeys", wire.DTInt64, "shared_name", name))
}

// benchTrain makes an env whose "emb" (rows of 16 floats, an Adagrad
// slot) holds rows ids 0..rows-1 updated at step 1, and every 100th of
// them at step 2.
func benchTrain(b *testing.B, rows int) *ops.Env {
	env := NewEnv(b)
	kv := func(extra ...any) map[string]*tfpb.AttrValue {
		return Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{benchDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64}, extra...)...)
	}
	init := GraphDef(benchHandle("emb"), benchHandle("emb/Adagrad"),
		ConstF32("default", []int64{1, benchDim}, make([]float32, benchDim)...), ConstI64("empty_key", nil, -1),
		NodeDef("init_acc", "InitializeKvVariableOp", In("emb/Adagrad", "emb", "default", "empty_key"), kv("slot_index", 1, "slot_num", 1)),
		NodeDef("init_emb", "InitializeKvVariableOp", In("emb", "emb", "default", "empty_key", "^init_acc"), kv("slot_num", 1)))
	if _, err := Run(b, env, init, nil); err != nil {
		b.Fatal(err)
	}
	step := func(ids []int64, at int64) {
		n := int64(len(ids))
		grads := make([]float32, n*benchDim)
		for i := range grads {
			grads[i] = 0.01
		}
		g := GraphDef(benchHandle("emb"), benchHandle("emb/Adagrad"),
			ConstI64("ids", []int64{n}, ids...), ConstF32("dv", []int64{benchDim}),
			NodeDef("gather", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)),
			ConstF32("lr", nil, 0.1), ConstF32("grad", []int64{n, benchDim}, grads...), ConstI64("step", nil, at),
			NodeDef("apply", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step", "^gather"),
				Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64)))
		if _, err := Run(b, env, g, nil); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]int64, 0, 1<<16)
	for lo := 0; lo < rows; lo += cap(ids) {
		ids = ids[:0]
		for i := lo; i < min(rows, lo+cap(ids)); i++ {
			ids = append(ids, int64(i)*2654435761)
		}
		step(ids, 1)
	}
	var few []int64
	for i := 0; i < rows; i += 100 {
		few = append(few, int64(i)*2654435761)
	}
	step(few, 2)
	return env
}

// benchSave is a SaveV2 (full) or IncrSave (since 2) of "emb" and its
// slot under prefix.
func benchSave(prefix string, incr bool) *tfpb.GraphDef {
	nodes := []*tfpb.NodeDef{benchHandle("emb"), benchHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstStrList("names", []int64{2}, "emb", "emb/Adagrad"), ConstStr("slices", []int64{2}, "", "")}
	dtypes := Attrs("dtypes", []wire.DataType{wire.DTResource, wire.DTResource})
	if !incr {
		return GraphDef(append(nodes, NodeDef("save", "SaveV2", In("prefix", "names", "slices", "emb", "emb/Adagrad"), dtypes))...)
	}
	return GraphDef(append(nodes, ConstStrList("base", nil, "full"), ConstStrList("prev", nil, "full"), ConstI64("since", nil, 2),
		NodeDef("save", "IncrSave", In("prefix", "names", "slices", "base", "prev", "since", "emb", "emb/Adagrad"), dtypes))...)
}

// benchImport restores "emb" and its slot from a full checkpoint
// (KvResourceImportV2) or applies an increment (KvResourceIncrImport).
func benchImport(prefix string, incr bool) *tfpb.GraphDef {
	nodes := []*tfpb.NodeDef{benchHandle("emb"), benchHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstStrList("name_emb", nil, "emb"), ConstStrList("name_slot", nil, "emb/Adagrad")}
	if incr {
		a := Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)
		return GraphDef(append(nodes,
			NodeDef("slot", "KvResourceIncrImport", In("prefix", "emb/Adagrad", "emb", "name_slot"), a),
			NodeDef("emb_import", "KvResourceIncrImport", In("prefix", "emb", "emb", "name_emb", "^slot"), a))...)
	}
	imp := func(node, self, name string, extra ...any) *tfpb.NodeDef {
		return NodeDef(node, "KvResourceImportV2", In("prefix", self, "emb", "default", name, "empty_key"),
			Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{benchDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64, "slot_num", 1}, extra...)...))
	}
	return GraphDef(append(nodes, ConstF32("default", []int64{1, benchDim}, make([]float32, benchDim)...), ConstI64("empty_key", nil, -1),
		imp("emb_import", "emb", "name_emb"), imp("slot", "emb/Adagrad", "name_slot", "slot_index", 1))...)
}

func bundleSize(b *testing.B, prefix string) int64 {
	files, _ := filepath.Glob(prefix + ".*")
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// BenchmarkKvIncrement saves, through the ps's ops, an embedding variable
// of 1M rows (-kv_bench_rows) of 16 floats with an Adagrad slot, 1% of whose rows changed
// since the last save, in full (SaveV2) and as an increment (IncrSave),
// and restores each: the full checkpoint into a fresh ps
// (KvResourceImportV2), the increment over it (KvResourceIncrImport).
func BenchmarkKvIncrement(b *testing.B) {
	rows := *kvBenchRows
	env := benchTrain(b, rows)
	full := filepath.Join(env.CheckpointDir, "full")
	if _, err := Run(b, env, benchSave(full, false), nil); err != nil {
		b.Fatal(err)
	}
	for _, incr := range []bool{false, true} {
		kind := map[bool]string{false: "full", true: "increment"}[incr]
		b.Run("save/"+kind+"/rows="+rowsName(rows)+"/touched=1%", func(b *testing.B) {
			i := 0
			var prefix string
			for b.Loop() {
				prefix = filepath.Join(env.CheckpointDir, kind+strconv.Itoa(i))
				if _, err := Run(b, env, benchSave(prefix, incr), nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(bundleSize(b, prefix)), "bytes")
		})
	}
	incr := filepath.Join(env.CheckpointDir, "increment0")
	b.Run("restore/full/rows="+rowsName(rows), func(b *testing.B) {
		for b.Loop() {
			dst := envIn(b, env.CheckpointDir)
			if _, err := Run(b, dst, benchImport(full, false), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore/increment/rows="+rowsName(rows)+"/touched=1%", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			dst := envIn(b, env.CheckpointDir)
			if _, err := Run(b, dst, benchImport(full, false), nil); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := Run(b, dst, benchImport(incr, true), nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
