package ops_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/embedding/changes"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// streamRows returns the rows a follower replayed into table name, as
// kvRows gives the ps's.
func streamRows(t *testing.T, f *changes.Follower, name string) map[int64][2*kvDim + 2]float64 {
	t.Helper()
	tab := f.Table(name)
	if tab == nil {
		t.Fatalf("the follower has no table %q, only %v", name, f.Tables())
	}
	s := tab.Snapshot()
	rows := map[int64][2*kvDim + 2]float64{}
	for i, id := range s.IDs {
		var r [2*kvDim + 2]float64
		for j := range kvDim {
			r[j], r[kvDim+j] = float64(s.Values[i*kvDim+j]), float64(s.Slots[0][i*kvDim+j])
		}
		r[2*kvDim], r[2*kvDim+1] = float64(s.Versions[i]), float64(s.Freqs[i])
		rows[id] = r
	}
	return rows
}

// TestKvStreamExportOp: a graph's exports write versions a follower
// replays into the ps's rows, evictions among them; without a stream
// directory the op is refused.
func TestKvStreamExportOp(t *testing.T) {
	env := NewEnv(t)
	export := func(step int64) (int64, error) {
		g := GraphDef(kvHandle("emb"), ConstI64("step", nil, step),
			NodeDef("export", "KvResourceStreamExport", In("emb", "step"), Attrs("Tkeys", wire.DTInt64, "Tstep", wire.DTInt64)))
		out, err := Run(t, env, g, nil, "export")
		if err != nil {
			return 0, err
		}
		return tensor.View[int64](out[0].Data)[0], nil
	}
	if _, err := Run(t, env, withAttrs(kvInitGraph(0), []string{"init_emb"}, "steps_to_live", 5), nil); err != nil {
		t.Fatal(err)
	}
	kvStep(t, env, []int64{1, 2}, []float32{1, 1, 1, 1}) // at step 7
	if _, err := export(8); err == nil || !strings.Contains(err.Error(), "no stream directory") {
		t.Fatalf("export without a stream directory: %v", err)
	}
	env.StreamDir = t.TempDir()
	f := changes.NewFollower(env.StreamDir)
	step := func(want int64, at int64) {
		t.Helper()
		v, err := export(at)
		if err != nil || v != want {
			t.Fatalf("export at step %d: version %d, %v; want %d", at, v, err, want)
		}
		if _, err := f.Poll(); err != nil {
			t.Fatal(err)
		}
		if got, ps := streamRows(t, f, "emb"), kvRows(t, env); !reflect.DeepEqual(got, ps) {
			t.Fatalf("after version %d the follower has %v, the ps %v", want, got, ps)
		}
	}
	step(1, 7)                                           // a base; updates from step 7 on are the next version's
	kvStep(t, env, []int64{2, 3}, []float32{1, 1, 1, 1}) // 3 is new
	step(2, 8)
	evict := GraphDef(kvHandle("emb"), ConstI64("step", nil, 13),
		NodeDef("evict", "KvResourceEvict", In("emb", "step"), Attrs("Tkeys", wire.DTInt64, "Tstep", wire.DTInt64)))
	if _, err := Run(t, env, evict, nil, "evict"); err != nil {
		t.Fatal(err)
	}
	step(3, 13)
	if len(kvRows(t, env)) != 0 || f.Table("emb").Len() != 0 {
		t.Fatal("eviction at 13 left rows")
	}
	if v, err := export(14); v != 0 || err != nil {
		t.Fatalf("an export with nothing changed: version %d, %v", v, err)
	}
}
