package ops_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// saveGraph is a graph whose node "save" saves the named constants under
// prefix, each with its shape_and_slices spec.
func saveGraph(prefix string, names, specs []string, values ...*tfpb.NodeDef) *tfpb.GraphDef {
	nodes := []*tfpb.NodeDef{
		ConstStrList("prefix", nil, prefix),
		ConstStrList("names", []int64{int64(len(names))}, names...),
		ConstStr("slices", []int64{int64(len(specs))}, specs...),
	}
	inputs := In("prefix", "names", "slices")
	var dtypes []wire.DataType
	for _, v := range values {
		nodes = append(nodes, v)
		inputs = append(inputs, v.Name)
		dtypes = append(dtypes, wire.DataType(v.Attr["dtype"].GetType()))
	}
	return GraphDef(append(nodes, NodeDef("save", "SaveV2", inputs, Attrs("dtypes", dtypes)))...)
}

// restoreGraph is a graph whose node "restore" restores the named tensors
// of dtypes from prefix.
func restoreGraph(prefix string, names, specs []string, dtypes ...wire.DataType) *tfpb.GraphDef {
	return GraphDef(
		ConstStr("prefix", nil, prefix),
		ConstStr("names", []int64{int64(len(names))}, names...),
		ConstStrList("slices", []int64{int64(len(specs))}, specs...),
		NodeDef("restore", "RestoreV2", In("prefix", "names", "slices"), Attrs("dtypes", dtypes)),
	)
}

// restoreOutputs names the first n outputs of restoreGraph's node.
func restoreOutputs(n int) []string {
	out := []string{"restore"}
	for i := 1; i < n; i++ {
		out = append(out, "restore:"+string(rune('0'+i)))
	}
	return out
}

// envIn returns a task's Env whose checkpoint directory is dir.
func envIn(t testing.TB, dir string) *ops.Env {
	env := NewEnv(t)
	env.CheckpointDir = dir
	return env
}

// TestSaveRestoreAcrossRestart saves a ps's variables, starts a new task
// (a restarted ps, with fresh variables) on the same directory, restores
// and reads them back; the files are TensorFlow's and read back with
// package checkpoint.
func TestSaveRestoreAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	f, i64t := wire.DTFloat, wire.DTInt64
	save := GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		NodeDef("step", "VarHandleOp", nil, Attrs("dtype", i64t, "shape", []int64{})),
		ConstF32("emb_val", []int64{3, 2}, 1, 2, 3, 4, 5, 6),
		ConstI64("step_val", nil, 42),
		NodeDef("init_emb", "AssignVariableOp", In("emb", "emb_val"), Attrs("dtype", f)),
		NodeDef("init_step", "AssignVariableOp", In("step", "step_val"), Attrs("dtype", i64t)),
		NodeDef("read_emb", "ReadVariableOp", In("emb", "^init_emb"), Attrs("dtype", f)),
		NodeDef("read_step", "ReadVariableOp", In("step", "^init_step"), Attrs("dtype", i64t)),
		ConstStrList("prefix", nil, "train/model.ckpt-42"),
		ConstStr("names", []int64{3}, "emb", "global_step", "vocab"),
		ConstStr("slices", []int64{3}, "", "", ""),
		ConstStrList("vocab", []int64{2}, "cat", ""),
		NodeDef("save", "SaveV2", In("prefix", "names", "slices", "read_emb", "read_step", "vocab"), Attrs("dtypes", []wire.DataType{f, i64t, wire.DTString})),
	)
	if _, err := Run(t, envIn(t, dir), save, nil); err != nil {
		t.Fatal(err)
	}
	r, err := checkpoint.Open(filepath.Join(dir, "train", "model.ckpt-42"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := r.Read("emb"); err != nil || !ApproxEqual(tensor.View[float32](got.Data), []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(got.Shape, []int64{3, 2}) {
		t.Fatalf("emb in the checkpoint: %v%v, %v", got.Shape, got.Data, err)
	}
	if _, err := os.Stat(checkpoint.DataFile(filepath.Join(dir, "train", "model.ckpt-42"), 0, 1)); err != nil {
		t.Fatalf("data file: %v", err)
	}

	restore := GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		NodeDef("step", "VarHandleOp", nil, Attrs("dtype", i64t, "shape", []int64{})),
		ConstStr("prefix", nil, filepath.Join(dir, "train/model.ckpt-42")), // absolute, inside
		ConstStr("names", []int64{3}, "global_step", "emb", "vocab"),
		ConstStr("slices", []int64{3}, "", "", ""),
		NodeDef("restore", "RestoreV2", In("prefix", "names", "slices"), Attrs("dtypes", []wire.DataType{i64t, f, wire.DTString})),
		NodeDef("assign_step", "AssignVariableOp", In("step", "restore:0"), Attrs("dtype", i64t)),
		NodeDef("assign_emb", "AssignVariableOp", In("emb", "restore:1"), Attrs("dtype", f)),
		NodeDef("read_emb", "ReadVariableOp", In("emb", "^assign_emb"), Attrs("dtype", f)),
		NodeDef("read_step", "ReadVariableOp", In("step", "^assign_step"), Attrs("dtype", i64t)),
	)
	out, err := Run(t, envIn(t, dir), restore, nil, "read_emb", "read_step", "restore:2")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(out[0].Shape, []int64{3, 2}) {
		t.Fatalf("restored emb %v%v", out[0].Shape, got)
	}
	if got := tensor.View[int64](out[1].Data); len(out[1].Shape) != 0 || got[0] != 42 {
		t.Fatalf("restored step %v%v", out[1].Shape, got)
	}
	if got, err := out[2].Strings(nil); err != nil || len(got) != 2 || string(got[0]) != "cat" || string(got[1]) != "" {
		t.Fatalf("restored vocab %q, %v", got, err)
	}
}

// TestRestoreTensorFlowCheckpoint restores the variables of a checkpoint
// TensorFlow wrote into variables a, b and c.
func TestRestoreTensorFlowCheckpoint(t *testing.T) {
	dir := t.TempDir()
	copyCheckpoint(t, "../checkpoint/testdata/tf-half-plus-three/variables", filepath.Join(dir, "export", "variables"))
	f := wire.DTFloat
	g := restoreGraph("export/variables", []string{"a", "b", "c"}, []string{"", "", ""}, f, f, f)
	for i, v := range []string{"a", "b", "c"} {
		g.Node = append(g.Node,
			NodeDef(v, "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{})),
			NodeDef("assign_"+v, "AssignVariableOp", In(v, restoreOutputs(3)[i]), Attrs("dtype", f)),
			NodeDef("read_"+v, "ReadVariableOp", In(v, "^assign_"+v), Attrs("dtype", f)))
	}
	out, err := Run(t, envIn(t, dir), g, nil, "read_a", "read_b", "read_c")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{0.5, 3, 3} {
		if got := Floats(&out[i]); len(out[i].Shape) != 0 || len(got) != 1 || got[0] != want {
			t.Errorf("variable %d restored as %v%v, want %v", i, out[i].Shape, got, want)
		}
	}
}

// copyCheckpoint copies the index and data file of the one-shard
// checkpoint src to dst.
func copyCheckpoint(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []func(string) string{checkpoint.IndexFile, func(p string) string { return checkpoint.DataFile(p, 0, 1) }} {
		b, err := os.ReadFile(name(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name(dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCheckpointErrors checks each refusal's code and that its message
// names what it is about.
func TestCheckpointErrors(t *testing.T) {
	dir := t.TempDir()
	f := wire.DTFloat
	if _, err := Run(t, envIn(t, dir), saveGraph("m", []string{"w", "s"}, []string{"", ""},
		ConstF32("w", []int64{2}, 1, 2), ConstStrList("s", nil, "x")), nil); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "bad")
	copyCheckpoint(t, filepath.Join(dir, "m"), corrupt)
	data := checkpoint.DataFile(corrupt, 0, 1)
	b, _ := os.ReadFile(data)
	b[1] ^= 0xff
	os.WriteFile(data, b, 0o644)

	for _, tc := range []struct {
		name string
		env  *ops.Env
		g    *tfpb.GraphDef
		code wire.Code
		msg  []string
	}{
		{"tensor not in checkpoint", envIn(t, dir), restoreGraph("m", []string{"nope"}, []string{""}, f), wire.NotFound, []string{"m", `"nope"`}},
		{"no checkpoint", envIn(t, dir), restoreGraph("other/m", []string{"w"}, []string{""}, f), wire.NotFound, []string{"other/m"}},
		{"corrupt data", envIn(t, dir), restoreGraph("bad", []string{"w"}, []string{""}, f), wire.DataLoss, []string{"bad", `"w"`}},
		{"corrupt index", envIn(t, dir), restoreGraph("bad2", []string{"w"}, []string{""}, f), wire.DataLoss, []string{"bad2"}},
		{"dtype mismatch", envIn(t, dir), restoreGraph("m", []string{"w"}, []string{""}, wire.DTInt64), wire.InvalidArgument, []string{"m", `"w"`, "float"}},
		{"shape mismatch", envIn(t, dir), restoreGraph("m", []string{"w"}, []string{"3 0,1"}, f), wire.InvalidArgument, []string{"m", `"w"`, "[3]"}},
		{"slice out of bounds", envIn(t, dir), restoreGraph("m", []string{"w"}, []string{"2 1,2"}, f), wire.InvalidArgument, []string{"m", `"w"`}},
		{"bad slice spec", envIn(t, dir), restoreGraph("m", []string{"w"}, []string{"2 zz"}, f), wire.InvalidArgument, []string{"m", `"w"`, "zz"}},
		{"names not a vector", envIn(t, dir), GraphDef(ConstStr("prefix", nil, "m"), ConstStr("names", nil, "w"), ConstStr("slices", []int64{1}, ""),
			NodeDef("restore", "RestoreV2", In("prefix", "names", "slices"), Attrs("dtypes", []wire.DataType{f}))), wire.InvalidArgument, []string{"tensor_names"}},
		{"restore outside", envIn(t, dir), restoreGraph("../m", []string{"w"}, []string{""}, f), wire.PermissionDenied, []string{"../m", dir}},
		{"save outside", envIn(t, dir), saveGraph("/tmp/elsewhere/m", []string{"w"}, []string{""}, ConstF32("w", nil, 1)), wire.PermissionDenied, []string{"/tmp/elsewhere/m", dir}},
		{"save wrong dtype", envIn(t, dir), GraphDef(ConstStr("prefix", nil, "m2"), ConstStr("names", []int64{1}, "w"), ConstStr("slices", []int64{1}, ""), ConstF32("w", nil, 1),
			NodeDef("save", "SaveV2", In("prefix", "names", "slices", "w"), Attrs("dtypes", []wire.DataType{wire.DTInt32}))), wire.InvalidArgument, []string{"m2", `"w"`}},
		{"save slice of another shape", envIn(t, dir), saveGraph("m3", []string{"w"}, []string{"4 0,3"}, ConstF32("w", []int64{2}, 1, 2)), wire.InvalidArgument, []string{"m3", `"w"`}},
		{"save without a directory", envIn(t, ""), saveGraph("m", []string{"w"}, []string{""}, ConstF32("w", nil, 1)), wire.FailedPrecondition, []string{"--checkpoint_dir"}},
		{"restore without a directory", envIn(t, ""), restoreGraph("m", []string{"w"}, []string{""}, f), wire.FailedPrecondition, []string{"--checkpoint_dir"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "corrupt index" {
				copyCheckpoint(t, filepath.Join(dir, "m"), filepath.Join(dir, "bad2"))
				os.WriteFile(checkpoint.IndexFile(filepath.Join(dir, "bad2")), []byte("not a table"), 0o644)
			}
			_, err := Run(t, tc.env, tc.g, nil)
			t.Log(err)
			if status.CodeOf(err) != tc.code {
				t.Fatalf("err = %v (%v), want %v", err, status.CodeOf(err), tc.code)
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%v does not name %s", err, m)
				}
			}
		})
	}
}

// TestSaveRestoreSlices saves a [6,2] variable partitioned over two ps
// tasks, each saving its part as a slice of the whole, and restores it
// whole, and as three parts for three ps tasks.
func TestSaveRestoreSlices(t *testing.T) {
	dir := t.TempDir()
	f := wire.DTFloat
	// Each ps saves its part and the one tensor it holds whole.
	if _, err := Run(t, envIn(t, dir), saveGraph("m_temp/part-00000-of-00002", []string{"emb", "step"}, []string{"6 2 0,3:-", ""},
		ConstF32("p0", []int64{3, 2}, 0, 1, 2, 3, 4, 5), ConstI64("s", nil, 9)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t, envIn(t, dir), saveGraph("m_temp/part-00001-of-00002", []string{"emb"}, []string{"6 2 3,3:-"},
		ConstF32("p1", []int64{3, 2}, 6, 7, 8, 9, 10, 11)), nil); err != nil {
		t.Fatal(err)
	}
	for i, prefix := range []string{"m_temp/part-00000-of-00002", "m_temp/part-00001-of-00002"} {
		g := restoreGraph(prefix, []string{"emb"}, []string{"6 2 0,6:-"}, f)
		if _, err := Run(t, envIn(t, dir), g, nil, "restore"); status.CodeOf(err) != wire.InvalidArgument {
			t.Errorf("shard %d alone restores the whole: %v, want InvalidArgument (not covered)", i, err)
		}
	}
	for i, want := range [][]float32{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}} {
		prefix := []string{"m_temp/part-00000-of-00002", "m_temp/part-00001-of-00002"}[i]
		spec := []string{"6 2 0,3:-", "6 2 3,3:-"}[i]
		out, err := Run(t, envIn(t, dir), restoreGraph(prefix, []string{"emb"}, []string{spec}, f), nil, "restore")
		if err != nil {
			t.Fatal(err)
		}
		if got := Floats(&out[0]); !ApproxEqual(got, want) || !slices.Equal(out[0].Shape, []int64{3, 2}) {
			t.Errorf("part %d restored as %v%v, want %v", i, out[0].Shape, got, want)
		}
	}
}

// mergeGraph merges the checkpoints under srcs into dst.
func mergeGraph(srcs []string, dst string, attrs ...any) *tfpb.GraphDef {
	return GraphDef(
		ConstStrList("srcs", []int64{int64(len(srcs))}, srcs...),
		ConstStr("dst", nil, dst),
		NodeDef("merge", "MergeV2Checkpoints", In("srcs", "dst"), Attrs(attrs...)),
	)
}

// TestMergeAndRestoreInOtherShards merges the parts two ps tasks saved of
// a partitioned variable, as a sharded Saver does, then restores it whole
// and as three parts for three ps tasks.
func TestMergeAndRestoreInOtherShards(t *testing.T) {
	dir := t.TempDir()
	f := wire.DTFloat
	parts := []string{"m_temp/part-00000-of-00002", filepath.Join(dir, "m_temp/part-00001-of-00002")}
	if _, err := Run(t, envIn(t, dir), saveGraph(parts[0], []string{"emb", "step"}, []string{"6 2 0,3:-", ""},
		ConstF32("p0", []int64{3, 2}, 0, 1, 2, 3, 4, 5), ConstI64("s", nil, 9)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t, envIn(t, dir), saveGraph(parts[1], []string{"emb"}, []string{"6 2 3,3:-"},
		ConstF32("p1", []int64{3, 2}, 6, 7, 8, 9, 10, 11)), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(t, envIn(t, dir), mergeGraph(parts, "m"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "m_temp")); !os.IsNotExist(err) {
		t.Errorf("the shards' directory is left after the merge: %v", err)
	}
	out, err := Run(t, envIn(t, dir), restoreGraph("m", []string{"emb", "step"}, []string{"", ""}, f, wire.DTInt64), nil, "restore", "restore:1")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) || !slices.Equal(out[0].Shape, []int64{6, 2}) {
		t.Errorf("emb restored whole as %v%v", out[0].Shape, got)
	}
	if got := tensor.View[int64](out[1].Data); got[0] != 9 {
		t.Errorf("step restored as %v", got)
	}
	for i, want := range [][]float32{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}} {
		spec := []string{"6 2 0,2:-", "6 2 2,2:-", "6 2 4,2:0,2"}[i]
		out, err := Run(t, envIn(t, dir), restoreGraph("m", []string{"emb"}, []string{spec}, f), nil, "restore")
		if err != nil {
			t.Fatal(err)
		}
		if got := Floats(&out[0]); !ApproxEqual(got, want) || !slices.Equal(out[0].Shape, []int64{2, 2}) {
			t.Errorf("shard %d of 3 (%s) restored as %v%v, want %v", i, spec, out[0].Shape, got, want)
		}
	}

	// A missing shard fails the merge, unless allow_missing_files.
	if _, err := Run(t, envIn(t, dir), saveGraph("n_temp/part-00000-of-00002", []string{"a"}, []string{""}, ConstF32("a", nil, 4)), nil); err != nil {
		t.Fatal(err)
	}
	nparts := []string{"n_temp/part-00000-of-00002", "n_temp/part-00001-of-00002"}
	if _, err := Run(t, envIn(t, dir), mergeGraph(nparts, "n"), nil); status.CodeOf(err) != wire.NotFound {
		t.Fatalf("merge with a shard missing: %v, want NotFound", err)
	}
	if _, err := Run(t, envIn(t, dir), mergeGraph(nparts, "n", "allow_missing_files", true, "delete_old_dirs", false), nil); err != nil {
		t.Fatalf("merge with a shard missing, allow_missing_files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "n_temp")); err != nil {
		t.Errorf("delete_old_dirs false, yet: %v", err)
	}
	if _, err := Run(t, envIn(t, dir), mergeGraph(nparts, "n", "allow_missing_files", true), nil); status.CodeOf(err) != wire.NotFound {
		t.Errorf("merge of none: %v, want NotFound", err)
	}
	for _, srcs := range [][]string{{"../x"}, {"m"}} {
		dst := "ok"
		if srcs[0] == "m" {
			dst = "/elsewhere/m"
		}
		if _, err := Run(t, envIn(t, dir), mergeGraph(srcs, dst), nil); status.CodeOf(err) != wire.PermissionDenied || !strings.Contains(err.Error(), dir) {
			t.Errorf("merge of %v into %s: %v, want PermissionDenied naming %s", srcs, dst, err, dir)
		}
	}
}

// TestCheckpointErrorNamesOnce: a RestoreV2 of a missing checkpoint, its
// prefix absolute as a TensorFlow master sends it, names the checkpoint
// once and the file the system could not open.
func TestCheckpointErrorNamesOnce(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "other", "m")
	for _, p := range []string{prefix, "other/m"} {
		_, err := Run(t, envIn(t, dir), restoreGraph(p, []string{"w"}, []string{""}, wire.DTFloat), nil)
		want := `node "restore" (RestoreV2): not found: checkpoint ` + prefix + ": open " + prefix +
			".index: no such file or directory: checkpoint: not found"
		if err == nil || err.Error() != want {
			t.Errorf("restore %s: %v\nwant %s", p, err, want)
		}
	}
}
