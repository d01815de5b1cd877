package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
)

// TestKvBloomSaved checks that a variable admitting by a counting Bloom
// filter saves its counters and a restore takes them back: an id looked
// up twice before the save is admitted by its third lookup after.
func TestKvBloomSaved(t *testing.T) {
	bloom := []any{"filter_freq", 3, "max_element_size", 1000, "false_positive_probability", float32(0.01)}
	env := NewEnv(t)
	if _, err := Run(t, env, withAttrs(kvInitGraph(0), []string{"init_emb"}, bloom...), nil); err != nil {
		t.Fatal(err)
	}
	gather := GraphDef(kvHandle("emb"), ConstI64("ids", []int64{2}, 9, 9), ConstF32("dv", []int64{kvDim}),
		NodeDef("g", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)))
	if _, err := Run(t, env, gather, nil); err != nil {
		t.Fatal(err)
	}
	if len(kvRows(t, env)) != 0 {
		t.Fatal("two lookups admitted an id of filter_freq 3")
	}
	if _, err := Run(t, env, kvSaveGraph("bloom", -1), nil); err != nil {
		t.Fatal(err)
	}
	dst := envIn(t, env.CheckpointDir)
	if _, err := Run(t, dst, withAttrs(kvImportGraph("bloom", 0, 1, false), []string{"import_emb", "import_slot"}, bloom...), nil); err != nil {
		t.Fatal(err)
	}
	once := GraphDef(kvHandle("emb"), ConstI64("ids", []int64{1}, 9), ConstF32("dv", []int64{kvDim}),
		NodeDef("g", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)))
	if _, err := Run(t, dst, once, nil); err != nil {
		t.Fatal(err)
	}
	if rows := kvRows(t, dst); len(rows) != 1 || rows[9][2*kvDim+1] != 3 {
		t.Fatalf("after the restore, a third lookup of 9: rows %v, want row 9 with freq 3", rows)
	}
}
