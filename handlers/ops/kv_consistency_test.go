package ops_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// runBuilt runs a built graph as step id, for graphs without feeds or
// fetches.
func runBuilt(g *graph.Graph, id int64) error {
	_, _, err := g.Run(context.Background(), &tfpb.RunGraphRequest{GraphHandle: "test", StepId: id}, nil, false)
	return err
}

// TestKvSaveUnderConcurrentUpdates is DeepRec issue 1023's case through
// the ps's ops: SaveV2 of an embedding variable and its Adagrad slot while
// workers run KvResourceSparseApplyAdagrad on every row, each save
// restored by KvResourceImportV2 into a fresh ps and exported. Every
// update adds a gradient of 1, so a row updated k times has an
// accumulator of 0.1+k and a value of 1 - lr * sum 1/sqrt(0.1+i), i =
// 1..k (its default value being 1): in every restored save, each row's
// value must be the one its accumulator says, and its version that of a
// worker that updated it.
func TestKvSaveUnderConcurrentUpdates(t *testing.T) {
	const rows, workers, maxSteps, saves, lr = 256, 3, 20000, 40, 0.01
	env := NewEnv(t)
	if _, err := Run(t, env, kvInitGraph(0), nil); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, rows)
	for i := range ids {
		ids[i] = int64(i)*4_000_012 + 1 // id mod 4 is 1: row 1 of the default values, all 1
	}
	ones := make([]float32, rows*kvDim)
	for i := range ones {
		ones[i] = 1
	}
	want := make([]float64, workers*maxSteps+1)
	want[0] = 1
	for k := 1; k < len(want); k++ {
		want[k] = want[k-1] - lr/math.Sqrt(0.1+float64(k))
	}
	var stepID atomic.Int64
	stepID.Store(1000)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range workers {
		g := GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"),
			ConstI64("ids", []int64{rows}, ids...), ConstF32("lr", nil, lr), ConstF32("grad", []int64{rows, kvDim}, ones...),
			ConstI64("step", nil, int64(w+1)),
			NodeDef("apply", "KvResourceSparseApplyAdagrad", In("emb", "emb/Adagrad", "lr", "grad", "ids", "step"),
				Attrs("T", wire.DTFloat, "Tindices", wire.DTInt64, "Tstep", wire.DTInt64)))
		built, err := graph.Build(g, env)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range maxSteps {
				select {
				case <-stop:
					return
				default:
				}
				if err := runBuilt(built, stepID.Add(1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	mid, amid := 0, 0
	for save := range saves {
		prefix := fmt.Sprintf("save-%d", save)
		before := stepID.Load()
		if _, err := Run(t, env, kvSaveGraph(prefix, -1), nil); err != nil {
			t.Fatal(err)
		}
		if stepID.Load() != before {
			amid++
		}
		dst := envIn(t, env.CheckpointDir)
		if _, err := Run(t, dst, kvImportGraph(prefix, 0, 1, save%2 == 0), nil); err != nil {
			t.Fatal(err)
		}
		ks := map[int]bool{}
		for id, r := range kvRows(t, dst) {
			k := int(math.Round(r[kvDim] - 0.1))
			for j := range kvDim {
				if math.Abs(r[kvDim+j]-0.1-float64(k)) > 1e-3 || math.Abs(r[j]-want[k]) > 5e-5 {
					t.Fatalf("save %d, row %d: value %v with accumulator %v, want %v after %d updates", save, id, r[j], r[kvDim+j], want[k], k)
				}
			}
			if v := r[2*kvDim]; (k == 0) != (v == 0) || v < 0 || v > workers {
				t.Fatalf("save %d, row %d: version %v after %d updates", save, id, v, k)
			}
			ks[k] = true
		}
		if len(ks) > 1 {
			mid++ // rows at different counts: the save ran between a batch's rows
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d saves, restored and checked, under %d workers' updates of all %d rows (%d updates in all): %d saves ran while updates did, %d saw rows at different counts", saves, workers, rows, stepID.Load()-1000, amid, mid)
}
