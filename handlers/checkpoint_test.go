package handlers

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// TestSaveRestoreAcrossRestart saves a ps's variables, starts a new worker
// (a restarted ps, new incarnation) on the same directory, restores and
// reads them back.
func TestSaveRestoreAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	f, i64t := wire.DTFloat, wire.DTInt64
	w1, err := NewWorker(Options{Job: "ps", CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	save := graphDef(
		nodeDef("emb", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{3, 2})),
		nodeDef("step", "VarHandleOp", nil, attrs("dtype", i64t, "shape", []int64{})),
		constF32("emb_val", []int64{3, 2}, 1, 2, 3, 4, 5, 6),
		constI64("step_val", nil, 42),
		nodeDef("init_emb", "AssignVariableOp", in("emb", "emb_val"), attrs("dtype", f)),
		nodeDef("init_step", "AssignVariableOp", in("step", "step_val"), attrs("dtype", i64t)),
		nodeDef("read_emb", "ReadVariableOp", in("emb", "^init_emb"), attrs("dtype", f)),
		nodeDef("read_step", "ReadVariableOp", in("step", "^init_step"), attrs("dtype", i64t)),
		constStr("prefix", nil, "train/model.ckpt-42"),
		constStr("names", []int64{2}, "emb", "global_step"),
		constStr("slices", []int64{2}, "", ""),
		nodeDef("save", "SaveV2", in("prefix", "names", "slices", "read_emb", "read_step"), attrs("dtypes", []wire.DataType{f, i64t})),
	)
	if _, err := runLocal(t, w1, save, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "train", "model.ckpt-42"+checkpointSuffix)); err != nil {
		t.Fatalf("checkpoint file: %v", err)
	}

	w2, err := NewWorker(Options{Job: "ps", CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	restore := graphDef(
		nodeDef("emb", "VarHandleOp", nil, attrs("dtype", f, "shape", []int64{3, 2})),
		nodeDef("step", "VarHandleOp", nil, attrs("dtype", i64t, "shape", []int64{})),
		constStr("prefix", nil, "train/model.ckpt-42"),
		constStr("names", []int64{2}, "global_step", "emb"),
		constStr("slices", []int64{2}, "", ""),
		nodeDef("restore", "RestoreV2", in("prefix", "names", "slices"), attrs("dtypes", []wire.DataType{i64t, f})),
		nodeDef("assign_step", "AssignVariableOp", in("step", "restore:0"), attrs("dtype", i64t)),
		nodeDef("assign_emb", "AssignVariableOp", in("emb", "restore:1"), attrs("dtype", f)),
		nodeDef("read_emb", "ReadVariableOp", in("emb", "^assign_emb"), attrs("dtype", f)),
		nodeDef("read_step", "ReadVariableOp", in("step", "^assign_step"), attrs("dtype", i64t)),
	)
	out, err := runLocal(t, w2, restore, nil, "read_emb", "read_step")
	if err != nil {
		t.Fatal(err)
	}
	if got := floatsOf(&out[0]); !approxEqual(got, []float32{1, 2, 3, 4, 5, 6}) || !sameShape(out[0].Shape, []int64{3, 2}) {
		t.Fatalf("restored emb %v%v", out[0].Shape, got)
	}
	if got := View[int64](out[1].Data); len(out[1].Shape) != 0 || got[0] != 42 {
		t.Fatalf("restored step %v%v", out[1].Shape, got)
	}

	// Missing tensors, missing files, corrupt files and wrong dtypes fail.
	missing := graphDef(
		constStr("prefix", nil, "train/model.ckpt-42"),
		constStr("names", []int64{1}, "nope"),
		constStr("slices", []int64{1}, ""),
		nodeDef("restore", "RestoreV2", in("prefix", "names", "slices"), attrs("dtypes", []wire.DataType{f})),
	)
	if _, err := runLocal(t, w2, missing, nil, "restore"); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("restore of a missing tensor: %v", err)
	}
	missing.Node[0] = constStr("prefix", nil, "../../elsewhere")
	if _, err := runLocal(t, w2, missing, nil, "restore"); !errors.Is(err, rpc.ErrNotFound) {
		t.Fatalf("restore of a missing file: %v", err)
	}
	path := filepath.Join(dir, "train", "model.ckpt-42"+checkpointSuffix)
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o644)
	if _, err := runLocal(t, w2, restore, nil, "read_emb"); !errors.Is(err, rpc.ErrDataLoss) {
		t.Fatalf("restore of a corrupt file: %v", err)
	}
	// Without a directory, checkpoints are refused.
	w3, _ := NewWorker(Options{Job: "ps"})
	if _, err := runLocal(t, w3, save, nil); !errors.Is(err, rpc.ErrFailedPrecondition) {
		t.Fatalf("save without a directory: %v", err)
	}
}

func TestCheckpointPathStaysInside(t *testing.T) {
	w, _ := NewWorker(Options{Job: "ps", CheckpointDir: "/ckpt"})
	for prefix, want := range map[string]string{
		"model":             "/ckpt/model" + checkpointSuffix,
		"a/b/model-10":      "/ckpt/a/b/model-10" + checkpointSuffix,
		"../../etc/passwd":  "/ckpt/etc/passwd" + checkpointSuffix,
		"/abs/path/model":   "/ckpt/abs/path/model" + checkpointSuffix,
		"a/../../../escape": "/ckpt/escape" + checkpointSuffix,
	} {
		got, err := w.checkpointPath(prefix)
		if err != nil || got != want {
			t.Errorf("checkpointPath(%q) = %q, %v; want %q", prefix, got, err, want)
		}
	}
}

// FuzzReadCheckpoint feeds the checkpoint reader arbitrary files, seeded
// with one SaveV2 wrote; whatever it accepts must hold valid tensors.
func FuzzReadCheckpoint(f *testing.F) {
	seed, err := os.ReadFile("testdata/checkpoint-seed" + checkpointSuffix)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "c"+checkpointSuffix)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := readCheckpoint(path)
		if err != nil {
			if !errors.Is(err, rpc.ErrDataLoss) {
				t.Fatalf("a bad file gave %v, want DataLoss", err)
			}
			return
		}
		for name, ts := range got {
			if err := ts.Check(); err != nil {
				t.Fatalf("tensor %q: %v", name, err)
			}
		}
	})
}

// TestCheckpointSeedIsCurrent checks that the fuzz seed is what SaveV2
// writes today, so a format change updates it.
func TestCheckpointSeedIsCurrent(t *testing.T) {
	dir := t.TempDir()
	w, _ := NewWorker(Options{Job: "ps", CheckpointDir: dir})
	if _, err := runLocal(t, w, graphDef(
		constF32("a", []int64{2, 2}, 1, 2, 3, 4),
		constI64("b", nil, 9),
		constStr("s", []int64{1}, "x"),
		constStr("prefix", nil, "seed"),
		constStr("names", []int64{3}, "a", "b", "s"),
		constStr("slices", []int64{3}, "", "", ""),
		nodeDef("save", "SaveV2", in("prefix", "names", "slices", "a", "b", "s"), attrs("dtypes", []wire.DataType{wire.DTFloat, wire.DTInt64, wire.DTString})),
	), nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "seed"+checkpointSuffix))
	want, err := os.ReadFile("testdata/checkpoint-seed" + checkpointSuffix)
	if os.Getenv("STARWIRE_UPDATE_SEEDS") == "1" {
		os.WriteFile("testdata/checkpoint-seed"+checkpointSuffix, got, 0o644)
		return
	}
	if err != nil || string(got) != string(want) {
		t.Fatalf("SaveV2 writes %d bytes unlike the seed (%v); rerun with STARWIRE_UPDATE_SEEDS=1", len(got), err)
	}
}
