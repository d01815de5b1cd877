package embedding

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func newTable(t testing.TB, opts Options) *Table {
	t.Helper()
	tab, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func gather(t testing.TB, tab *Table, ids ...int64) []float32 {
	t.Helper()
	out := make([]float32, len(ids)*tab.Dim())
	if err := tab.Gather(ids, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsOf returns a snapshot's rows by id: value, then each slot.
func rowsOf(s *Snapshot) map[int64][]float32 {
	m := map[int64][]float32{}
	for i, id := range s.IDs {
		row := slices.Clone(s.Values[i*s.Dim : (i+1)*s.Dim])
		for _, slot := range s.Slots {
			row = append(row, slot[i*s.Dim:(i+1)*s.Dim]...)
		}
		m[id] = row
	}
	return m
}

func freqsOf(s *Snapshot) map[int64]int64 {
	m := map[int64]int64{}
	for i, id := range s.IDs {
		m[id] = s.Freqs[i]
	}
	return m
}

// TestFirstLookupMakesRow checks that a lookup makes a row from the
// initializer, with its slot at its initial value, and counts lookups.
func TestFirstLookupMakesRow(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0.1}, Init: Initializer{Constant: 0.5}})
	if got := gather(t, tab, 3, 7, 3); !slices.Equal(got, []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}) {
		t.Fatalf("gather = %v, want 0.5 everywhere", got)
	}
	s := tab.Snapshot()
	if tab.Len() != 2 || !slices.Equal(rowsOf(s)[3], []float32{0.5, 0.5, 0.1, 0.1}) {
		t.Fatalf("%d rows, row 3 %v; want 2 rows, [0.5 0.5 0.1 0.1]", tab.Len(), rowsOf(s)[3])
	}
	if f := freqsOf(s); f[3] != 2 || f[7] != 1 {
		t.Fatalf("freqs %v, want 3:2 7:1", f)
	}
}

// TestUniformInitializer checks that random rows depend on the seed and
// the id alone, and lie in [-limit, limit).
func TestUniformInitializer(t *testing.T) {
	init := Initializer{UniformLimit: 0.05, Seed: 42}
	a := newTable(t, Options{Dim: 8, Init: init})
	b := newTable(t, Options{Dim: 8, Init: init})
	other := newTable(t, Options{Dim: 8, Init: Initializer{UniformLimit: 0.05, Seed: 43}})
	gather(t, b, 99, 1, 2) // another order of first lookups
	x, y, z := gather(t, a, 1, 2), gather(t, b, 1, 2), gather(t, other, 1, 2)
	if !slices.Equal(x, y) {
		t.Fatalf("one seed, two tables: %v and %v", x, y)
	}
	if slices.Equal(x, z) || slices.Equal(x[:8], x[8:]) {
		t.Fatalf("rows of other seeds or ids are equal: %v %v", x, z)
	}
	for _, v := range x {
		if v < -0.05 || v >= 0.05 || v == 0 {
			t.Fatalf("value %v outside [-0.05, 0.05) or zero", v)
		}
	}
}

// TestCounterFilter checks admission after FilterFreq lookups: before,
// a lookup answers the initializer's value, makes no row, and the id's
// gradients are dropped; the lookups that admit it are its count.
func TestCounterFilter(t *testing.T) {
	tab := newTable(t, Options{Dim: 1, Slots: []float32{0.1}, Init: Initializer{Constant: 1}, FilterFreq: 3})
	gather(t, tab, 5, 5)
	if n, err := tab.ApplyAdagrad([]int64{5}, []float32{1}, 0.1, 1); err != nil || n != 0 || tab.Len() != 0 {
		t.Fatalf("before admission: applied %d (%v), %d rows; want 0, 0", n, err, tab.Len())
	}
	s := tab.Snapshot()
	if !slices.Equal(s.FilteredIDs, []int64{5}) || !slices.Equal(s.FilteredFreqs, []int64{2}) {
		t.Fatalf("filtered %v %v, want [5] [2]", s.FilteredIDs, s.FilteredFreqs)
	}
	if got := gather(t, tab, 5); got[0] != 1 || tab.Len() != 1 {
		t.Fatalf("third lookup: %v, %d rows; want [1], 1 row", got, tab.Len())
	}
	if n, _ := tab.ApplyAdagrad([]int64{5}, []float32{1}, 0.1, 1); n != 1 {
		t.Fatalf("after admission: applied %d, want 1", n)
	}
	s = tab.Snapshot()
	if freqsOf(s)[5] != 3 || len(s.FilteredIDs) != 0 {
		t.Fatalf("freq %d, filtered %v; want 3, none", freqsOf(s)[5], s.FilteredIDs)
	}
}

// adagrad is the reference: TensorFlow's SparseApplyAdagrad on one
// row, in float64.
func adagrad(v, acc []float64, g []float32, lr float64) {
	for j := range v {
		acc[j] += float64(g[j]) * float64(g[j])
		v[j] -= lr * float64(g[j]) / math.Sqrt(acc[j])
	}
}

// TestAdagrad checks updates against the reference, duplicate ids in a
// batch applied one after the other, and versions set to the step.
func TestAdagrad(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0.1}, Init: Initializer{UniformLimit: 1, Seed: 7}})
	init := gather(t, tab, 1, 2)
	ref := map[int64][2][]float64{
		1: {{float64(init[0]), float64(init[1])}, {0.1, 0.1}},
		2: {{float64(init[2]), float64(init[3])}, {0.1, 0.1}},
	}
	ids := []int64{1, 2, 1}
	grads := []float32{0.5, -1, 2, 0.25, -0.75, 3}
	if n, err := tab.ApplyAdagrad(ids, grads, 0.3, 17); err != nil || n != 3 {
		t.Fatalf("applied %d (%v), want 3", n, err)
	}
	for i, id := range ids {
		adagrad(ref[id][0], ref[id][1], grads[2*i:2*i+2], 0.3)
	}
	s := tab.Snapshot()
	for i, id := range s.IDs {
		got := rowsOf(s)[id]
		want := append(slices.Clone(ref[id][0]), ref[id][1]...)
		for j := range want {
			if math.Abs(float64(got[j])-want[j]) > 1e-5 {
				t.Fatalf("row %d: %v, want %v", id, got, want)
			}
		}
		if s.Versions[i] != 17 {
			t.Fatalf("row %d: version %d, want 17", id, s.Versions[i])
		}
	}
}

// TestEvict checks eviction by steps to live and by L2 norm, and that the
// rows left keep their values (rows move when others are removed).
func TestEvict(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{1}, Init: Initializer{Constant: 1}})
	var ids []int64
	for id := range int64(1000) {
		ids = append(ids, id*7919)
	}
	gather(t, tab, ids...)
	// Even ids are updated at step 20, odd ones at step 5; ids below 100
	// are pushed to a norm below 0.5.
	for _, id := range ids {
		step, g := int64(5), float32(0)
		if id%2 == 0 {
			step = 20
		}
		if id < 100*7919 {
			g = 10 // one step of lr 0.9: 1 - 0.9*10/sqrt(101) ~ 0.104
		}
		if _, err := tab.ApplyAdagrad([]int64{id}, []float32{g, g}, 0.9, step); err != nil {
			t.Fatal(err)
		}
	}
	before := rowsOf(tab.Snapshot())
	if n := tab.Evict(21, 10, 0.5); n != 550 {
		t.Fatalf("evicted %d, want the 500 odd ids and the 50 even ones below 100", n)
	}
	after := tab.Snapshot()
	for i, id := range after.IDs {
		if id%2 != 0 || id < 100*7919 || after.Versions[i] != 20 || !slices.Equal(rowsOf(after)[id], before[id]) {
			t.Fatalf("row %d kept: version %d, %v (was %v)", id, after.Versions[i], rowsOf(after)[id], before[id])
		}
	}
	if len(after.IDs) != 450 {
		t.Fatalf("%d rows left, want 450", len(after.IDs))
	}
	// Every row left is found where the index says.
	got := gather(t, tab, after.IDs...)
	for i, id := range after.IDs {
		if !slices.Equal(got[2*i:2*i+2], before[id][:2]) {
			t.Fatalf("gather %d = %v, want %v", id, got[2*i:2*i+2], before[id][:2])
		}
	}
}

// TestIndexAgainstMap runs random inserts and removes on an index beside
// a map, which it must agree with after every step.
func TestIndexAgainstMap(t *testing.T) {
	var x index
	x.init(8)
	model := map[int64]int32{}
	r := rand.New(rand.NewPCG(1, 2))
	for step := range 20000 {
		id := r.Int64N(2000) << (r.IntN(3) * 20) // some ids share low bits
		h := mix(uint64(id))
		row, ok := x.find(id, h)
		want, wok := model[id]
		if ok != wok || (ok && row != want) {
			t.Fatalf("step %d: find %d = %d, %v; want %d, %v", step, id, row, ok, want, wok)
		}
		if ok {
			x.remove(id, h)
			delete(model, id)
		} else {
			x.insert(id, h, int32(step))
			model[id] = int32(step)
		}
		if x.Len() != len(model) {
			t.Fatalf("step %d: %d ids, want %d", step, x.Len(), len(model))
		}
	}
	for id, want := range model {
		if row, ok := x.find(id, mix(uint64(id))); !ok || row != want {
			t.Fatalf("find %d = %d, %v; want %d", id, row, ok, want)
		}
	}
}

// TestRestoreRefusesMismatch checks that a snapshot whose tensors
// disagree is refused, naming what, with the table left as it was, and
// that one that fits restores every row.
func TestRestoreRefusesMismatch(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0.1}, Init: Initializer{Constant: 1}})
	gather(t, tab, 1, 2, 3)
	good := tab.Snapshot()
	bad := []func(s *Snapshot){
		func(s *Snapshot) { s.Values = s.Values[:4] },
		func(s *Snapshot) { s.Slots[0] = s.Slots[0][:2] },
		func(s *Snapshot) { s.Versions = s.Versions[:1] },
		func(s *Snapshot) { s.IDs[1] = s.IDs[0] },
		func(s *Snapshot) { s.Slots = nil },
	}
	empty := newTable(t, Options{Dim: 2, Slots: []float32{0.1}})
	gather(t, empty, 9)
	for i, spoil := range bad {
		s := tab.Snapshot()
		spoil(s)
		if err := empty.Restore(s); !errors.Is(err, ErrMismatch) {
			t.Fatalf("case %d: restore: %v, want ErrMismatch", i, err)
		}
		if got := empty.Snapshot(); !slices.Equal(got.IDs, []int64{9}) {
			t.Fatalf("case %d: a refused restore left ids %v, want [9]", i, got.IDs)
		}
	}
	if err := empty.Restore(good); err != nil {
		t.Fatal(err)
	}
	if got, want := rowsOf(empty.Snapshot()), rowsOf(good); len(got) != 3 || !equalRows(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
}

func equalRows(a, b map[int64][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		if !slices.Equal(r, b[id]) {
			return false
		}
	}
	return true
}

// TestSnapshotUnderConcurrentUpdates is DeepRec issue 1023's case: saves
// taken while workers update. Every update adds a gradient of 1 to every
// row, so a row updated k times has an accumulator of 0.1+k and a value
// of -lr * sum 1/sqrt(0.1+i), i = 1..k: in every snapshot, each row's
// value must be the one its accumulator says, its version the step of
// that update, and a restore of it must give back the same rows.
func TestSnapshotUnderConcurrentUpdates(t *testing.T) {
	const dim, rows, workers, steps, lr = 4, 512, 4, 500, 0.01
	tab := newTable(t, Options{Dim: dim, Slots: []float32{0.1}})
	ids := make([]int64, rows)
	for i := range ids {
		ids[i] = int64(i) * 1_000_003
	}
	gather(t, tab, ids...)
	want := make([]float64, workers*steps+1) // value after k updates
	for k := 1; k < len(want); k++ {
		want[k] = want[k-1] - lr/math.Sqrt(0.1+float64(k))
	}
	var step atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			grads := slices.Repeat([]float32{1}, rows*dim)
			for range steps {
				if _, err := tab.ApplyAdagrad(ids, grads, lr, step.Add(1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	saves := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; saves++ {
		select {
		case <-done:
			running = false
		default:
		}
		s := tab.Snapshot()
		for i, id := range s.IDs {
			k := int(math.Round(float64(s.Slots[0][i*dim]) - 0.1))
			for j := range dim {
				v, acc := float64(s.Values[i*dim+j]), float64(s.Slots[0][i*dim+j])
				if math.Abs(acc-0.1-float64(k)) > 1e-3 || math.Abs(v-want[k]) > 5e-5 {
					t.Fatalf("save %d, row %d: value %v with accumulator %v, want %v after %d updates", saves, id, v, acc, want[k], k)
				}
			}
			// Steps are handed out before their updates run, so a row's
			// version is that of one of the steps begun, not of the k-th.
			if v := s.Versions[i]; (k == 0) != (v == 0) || v > step.Load() {
				t.Fatalf("save %d, row %d: version %d after %d updates, %d steps begun", saves, id, v, k, step.Load())
			}
		}
		fresh := newTable(t, Options{Dim: dim, Slots: []float32{0.1}})
		if err := fresh.Restore(s); err != nil || !equalRows(rowsOf(fresh.Snapshot()), rowsOf(s)) {
			t.Fatalf("save %d: restore %v, or rows differ", saves, err)
		}
	}
	t.Logf("%d saves under %d workers' %d updates each", saves, workers, steps)
	final := tab.Snapshot()
	for i := range final.IDs {
		if acc := final.Slots[0][i*dim]; math.Abs(float64(acc)-0.1-workers*steps) > 1e-2 {
			t.Fatalf("row %d: accumulator %v, want %v", final.IDs[i], acc, 0.1+workers*steps)
		}
	}
}

// TestHotPathAllocations checks that lookups and updates of rows that
// exist allocate nothing.
func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	const dim, n = 16, 1000
	tab := newTable(t, Options{Dim: dim, Slots: []float32{0.1}})
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i) * 31
	}
	out, grads := make([]float32, n*dim), make([]float32, n*dim)
	gather(t, tab, ids...)
	if a := testing.AllocsPerRun(50, func() { _ = tab.Gather(ids, out) }); a != 0 {
		t.Errorf("Gather of %d ids: %v allocations, want 0", n, a)
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = tab.ApplyAdagrad(ids, grads, 0.1, 1) }); a != 0 {
		t.Errorf("ApplyAdagrad of %d ids: %v allocations, want 0", n, a)
	}
}

// TestRowsInitializerAndSlots checks DeepRec's default value matrix (id
// mod its rows), slot initial values set before the first row and
// refused after, and Adagrad on a slot other than the first.
func TestRowsInitializerAndSlots(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0, 0}, Init: Initializer{Rows: []float32{0, 0, 1, 1, 2, 2}}})
	if err := tab.SetSlotInit(1, 0.5); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, tab, 4, 3, 2); !slices.Equal(got, []float32{1, 1, 0, 0, 2, 2}) {
		t.Fatalf("gather 4, 3, 2 = %v, want rows 1, 0, 2 of the matrix", got)
	}
	if err := tab.SetSlotInit(0, 1); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("SetSlotInit on a table with rows: %v, want ErrNotEmpty", err)
	}
	if _, err := tab.ApplyAdagradSlot(1, []int64{4}, []float32{1, 2}, 0.5, 3); err != nil {
		t.Fatal(err)
	}
	want := []float32{1 - 0.5/float32(math.Sqrt(1.5)), 1 - 0.5*2/float32(math.Sqrt(4.5)), 0, 0, 1.5, 4.5}
	got := rowsOf(tab.Snapshot())[4]
	for j := range want {
		if math.Abs(float64(got[j]-want[j])) > 1e-6 {
			t.Fatalf("row 4 = %v, want %v", got, want)
		}
	}
	if _, err := New(Options{Dim: 2, Init: Initializer{Rows: []float32{1, 2, 3}}}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("rows of 3 floats for a dimension of 2: %v, want ErrMismatch", err)
	}
}
