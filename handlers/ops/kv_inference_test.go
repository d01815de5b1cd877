package ops_test

import (
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
)

// TestKvGatherInference: KvResourceGather with is_inference reads the
// rows training made and the default value for the others, and neither
// makes a row nor counts towards admission; initializing the variable
// and its slot again, as a job's recovery does, keeps both.
func TestKvGatherInference(t *testing.T) {
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(2), nil); err != nil {
		t.Fatal(err)
	}
	infer := func(ids ...int64) []float32 {
		t.Helper()
		g := GraphDef(kvHandle("emb"), ConstI64("ids", []int64{int64(len(ids))}, ids...), ConstF32("dv", []int64{kvDim}),
			NodeDef("gather", "KvResourceGather", In("emb", "ids", "dv"), Attrs("dtype", wire.DTFloat, "Tkeys", wire.DTInt64, "is_inference", true)))
		out, err := Run(t, env, g, nil, "gather")
		if err != nil {
			t.Fatal(err)
		}
		return Floats(&out[0])
	}
	// Three inferences of id 3 count nothing: filter_freq 2 still drops
	// the first training step's gradient.
	for range 3 {
		if got := infer(3); !ApproxEqual(got, []float32{3, 3}) {
			t.Fatalf("inference of id 3: %v, want the default [3 3]", got)
		}
	}
	if _, after := kvStep(t, env, []int64{3}, []float32{1, 1}); !ApproxEqual(after, []float32{3, 3}) {
		t.Fatalf("after the first training lookup %v: the inferences were counted", after)
	}
	_, trained := kvStep(t, env, []int64{3}, []float32{1, 1})
	if _, err := Run(t, env, kvInitGraph(2), nil); err != nil {
		t.Fatalf("initializing again: %v", err)
	}
	if got := infer(3, 1); !ApproxEqual(got, append(trained, 1, 1)) {
		t.Errorf("inference after initializing again %v, want the trained row %v and the default [1 1]", got, trained)
	}
}
