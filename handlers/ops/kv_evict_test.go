package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// withAttrs sets attributes of the nodes of g named in names.
func withAttrs(g *tfpb.GraphDef, names []string, kv ...any) *tfpb.GraphDef {
	attrs := Attrs(kv...)
	for _, n := range g.Node {
		for _, name := range names {
			if n.Name == name {
				for k, v := range attrs {
					n.Attr[k] = v
				}
			}
		}
	}
	return g
}

// TestKvEvictOp checks eviction asked for by a graph: rows not updated
// within steps_to_live of the given step go, with their slots; the rest
// stay.
func TestKvEvictOp(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, withAttrs(kvInitGraph(0), []string{"init_emb"}, "steps_to_live", 5), nil); err != nil {
		t.Fatal(err)
	}
	kvStep(t, env, []int64{1, 2}, []float32{1, 1, 1, 1}) // at step 7
	gather := GraphDef(kvHandle("emb"), ConstI64("ids", []int64{1}, 3), ConstF32("dv", []int64{kvDim}),
		NodeDef("g", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64)))
	if _, err := Run(t, env, gather, nil); err != nil { // row 3, never updated
		t.Fatal(err)
	}
	evict := func(step int64) int64 {
		g := GraphDef(kvHandle("emb/Adagrad"), ConstI64("step", nil, step),
			NodeDef("evict", "KvResourceEvict", In("emb/Adagrad", "step"), Attrs("Tkeys", wire.DTInt64, "Tstep", wire.DTInt64)))
		out, err := Run(t, env, g, nil, "evict")
		if err != nil {
			t.Fatal(err)
		}
		return tensor.View[int64](out[0].Data)[0]
	}
	if n := evict(12); n != 1 {
		t.Fatalf("evict at step 12: %d rows, want 1 (row 3)", n)
	}
	if rows := kvRows(t, env); len(rows) != 2 {
		t.Fatalf("after evicting at 12: %d rows, want 2", len(rows))
	}
	if n := evict(13); n != 2 || len(kvRows(t, env)) != 0 {
		t.Fatalf("evict at step 13: %d rows, want 2, and none left", n)
	}
}
