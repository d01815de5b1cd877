package ops_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestSaveRestoreAcrossRestart saves a ps's variables, starts a new task
// (a restarted ps, with fresh variables) on the same directory, restores
// and reads them back.
func TestSaveRestoreAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	f, i64t := wire.DTFloat, wire.DTInt64
	env1 := NewEnv(t)
	env1.CheckpointDir = dir
	save := GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		NodeDef("step", "VarHandleOp", nil, Attrs("dtype", i64t, "shape", []int64{})),
		ConstF32("emb_val", []int64{3, 2}, 1, 2, 3, 4, 5, 6),
		ConstI64("step_val", nil, 42),
		NodeDef("init_emb", "AssignVariableOp", In("emb", "emb_val"), Attrs("dtype", f)),
		NodeDef("init_step", "AssignVariableOp", In("step", "step_val"), Attrs("dtype", i64t)),
		NodeDef("read_emb", "ReadVariableOp", In("emb", "^init_emb"), Attrs("dtype", f)),
		NodeDef("read_step", "ReadVariableOp", In("step", "^init_step"), Attrs("dtype", i64t)),
		ConstStr("prefix", nil, "train/model.ckpt-42"),
		ConstStr("names", []int64{2}, "emb", "global_step"),
		ConstStr("slices", []int64{2}, "", ""),
		NodeDef("save", "SaveV2", In("prefix", "names", "slices", "read_emb", "read_step"), Attrs("dtypes", []wire.DataType{f, i64t})),
	)
	if _, err := Run(t, env1, save, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "train", "model.ckpt-42.swckpt")); err != nil {
		t.Fatalf("checkpoint file: %v", err)
	}

	env2 := NewEnv(t)
	env2.CheckpointDir = dir
	restore := GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{3, 2})),
		NodeDef("step", "VarHandleOp", nil, Attrs("dtype", i64t, "shape", []int64{})),
		ConstStr("prefix", nil, "train/model.ckpt-42"),
		ConstStr("names", []int64{2}, "global_step", "emb"),
		ConstStr("slices", []int64{2}, "", ""),
		NodeDef("restore", "RestoreV2", In("prefix", "names", "slices"), Attrs("dtypes", []wire.DataType{i64t, f})),
		NodeDef("assign_step", "AssignVariableOp", In("step", "restore:0"), Attrs("dtype", i64t)),
		NodeDef("assign_emb", "AssignVariableOp", In("emb", "restore:1"), Attrs("dtype", f)),
		NodeDef("read_emb", "ReadVariableOp", In("emb", "^assign_emb"), Attrs("dtype", f)),
		NodeDef("read_step", "ReadVariableOp", In("step", "^assign_step"), Attrs("dtype", i64t)),
	)
	out, err := Run(t, env2, restore, nil, "read_emb", "read_step")
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !ApproxEqual(got, []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(out[0].Shape, []int64{3, 2}) {
		t.Fatalf("restored emb %v%v", out[0].Shape, got)
	}
	if got := tensor.View[int64](out[1].Data); len(out[1].Shape) != 0 || got[0] != 42 {
		t.Fatalf("restored step %v%v", out[1].Shape, got)
	}

	// Missing tensors, missing files, corrupt files and wrong dtypes fail.
	missing := GraphDef(
		ConstStr("prefix", nil, "train/model.ckpt-42"),
		ConstStr("names", []int64{1}, "nope"),
		ConstStr("slices", []int64{1}, ""),
		NodeDef("restore", "RestoreV2", In("prefix", "names", "slices"), Attrs("dtypes", []wire.DataType{f})),
	)
	if _, err := Run(t, env2, missing, nil, "restore"); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("restore of a missing tensor: %v", err)
	}
	missing.Node[0] = ConstStr("prefix", nil, "../../elsewhere")
	if _, err := Run(t, env2, missing, nil, "restore"); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("restore of a missing file: %v", err)
	}
	path := filepath.Join(dir, "train", "model.ckpt-42.swckpt")
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o644)
	if _, err := Run(t, env2, restore, nil, "read_emb"); !errors.Is(err, rpc.ErrDataLoss) {
		t.Fatalf("restore of a corrupt file: %v", err)
	}
	// Without a directory, checkpoints are refused.
	env3 := NewEnv(t)
	env3.CheckpointDir = ""
	if _, err := Run(t, env3, save, nil); !errors.Is(err, rpc.ErrFailedPrecondition) {
		t.Fatalf("save without a directory: %v", err)
	}
}

// TestCheckpointSeedIsCurrent checks that the fuzz seed is what SaveV2
// writes today, so a format change updates it.
func TestCheckpointSeedIsCurrent(t *testing.T) {
	dir := t.TempDir()
	env := NewEnv(t)
	env.CheckpointDir = dir
	if _, err := Run(t, env, GraphDef(
		ConstF32("a", []int64{2, 2}, 1, 2, 3, 4),
		ConstI64("b", nil, 9),
		ConstStr("s", []int64{1}, "x"),
		ConstStr("prefix", nil, "seed"),
		ConstStr("names", []int64{3}, "a", "b", "s"),
		ConstStr("slices", []int64{3}, "", "", ""),
		NodeDef("save", "SaveV2", In("prefix", "names", "slices", "a", "b", "s"), Attrs("dtypes", []wire.DataType{wire.DTFloat, wire.DTInt64, wire.DTString})),
	), nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "seed.swckpt"))
	want, err := os.ReadFile("testdata/checkpoint-seed.swckpt")
	if os.Getenv("STARWIRE_UPDATE_SEEDS") == "1" {
		os.WriteFile("testdata/checkpoint-seed.swckpt", got, 0o644)
		return
	}
	if err != nil || string(got) != string(want) {
		t.Fatalf("SaveV2 writes %d bytes unlike the seed (%v); rerun with STARWIRE_UPDATE_SEEDS=1", len(got), err)
	}
}
