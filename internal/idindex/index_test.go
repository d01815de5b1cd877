package idindex

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAgainstMap runs random inserts, moves, removes, counted finds and
// count sets of ids from a small range (so that probes collide, wrap and
// shift) against a map: an id's count survives the grows of the index and
// the removes of other ids, whose backward shifts move its slot.
func TestAgainstMap(t *testing.T) {
	type entry struct {
		row   int32
		count uint32
	}
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var x Index
		if seed%2 == 1 {
			x = New(int(seed * 10))
		}
		model := map[int64]entry{}
		for step := range 5000 {
			id := r.Int64N(300) - 150
			h := Hash(uint64(id))
			e, in := model[id]
			switch r.IntN(6) {
			case 0, 1:
				if !in {
					e = entry{row: int32(r.IntN(1 << 20))}
					if r.IntN(2) == 0 {
						x.Insert(id, h, e.row)
					} else {
						e.count = r.Uint32()
						x.InsertCount(id, h, e.row, e.count)
					}
					model[id] = e
				}
			case 2:
				if in {
					x.Remove(id, h)
					delete(model, id)
				}
			case 3:
				if in {
					e.row++
					model[id] = e
					x.SetRow(id, h, e.row)
				}
			case 4:
				got, ok := x.FindCount(id, h)
				if ok != in || got != e.row {
					t.Fatalf("seed %d step %d: FindCount(%d) = %d, %v; want %d, %v", seed, step, id, got, ok, e.row, in)
				}
				if in {
					e.count++
					model[id] = e
				}
			case 5:
				if in {
					e.count = r.Uint32N(10)
					model[id] = e
					x.SetCount(id, h, e.count)
				}
			}
			if x.Len() != len(model) {
				t.Fatalf("seed %d step %d: Len %d, the model holds %d", seed, step, x.Len(), len(model))
			}
			if 4*x.Len() > 3*x.Slots() {
				t.Fatalf("seed %d step %d: %d ids in %d slots", seed, step, x.Len(), x.Slots())
			}
			for k := int64(-150); k < 150; k += 7 {
				got, ok := x.Find(k, Hash(uint64(k)))
				want, in := model[k]
				if ok != in || got != want.row {
					t.Fatalf("seed %d step %d: Find(%d) = %d, %v; want %d, %v", seed, step, k, got, ok, want.row, in)
				}
				if in {
					if c := x.Count(k, Hash(uint64(k))); c != want.count {
						t.Fatalf("seed %d step %d: Count(%d) = %d; want %d", seed, step, k, c, want.count)
					}
				}
			}
			if step%100 == 0 {
				seen := 0
				x.All(func(id int64, row int32, count uint32) {
					if e, in := model[id]; !in || e.row != row || e.count != count {
						t.Fatalf("seed %d step %d: All gives %d at %d counted %d; the model has %v, %v", seed, step, id, row, count, e, in)
					}
					seen++
				})
				if seen != len(model) {
					t.Fatalf("seed %d step %d: All gives %d ids of %d", seed, step, seen, len(model))
				}
			}
		}
	}
}

// TestCountSaturates checks that a count at math.MaxUint32 stays there.
func TestCountSaturates(t *testing.T) {
	var x Index
	x.InsertCount(5, Hash(5), 0, math.MaxUint32-1)
	for range 3 {
		if r, ok := x.FindCount(5, Hash(5)); !ok || r != 0 {
			t.Fatalf("FindCount(5) = %d, %v", r, ok)
		}
	}
	if c := x.Count(5, Hash(5)); c != math.MaxUint32 {
		t.Fatalf("count %d; want %d", c, uint32(math.MaxUint32))
	}
}

func TestEmpty(t *testing.T) {
	var x Index
	if _, ok := x.Find(3, Hash(3)); ok || x.Home(Hash(3)) != 0 || x.Len() != 0 {
		t.Fatalf("the zero Index finds 3 (%v) or has %d ids", ok, x.Len())
	}
	if y := New(100); y.Slots() < 134 || y.Slots()&(y.Slots()-1) != 0 {
		t.Fatalf("New(100) has %d slots; want a power of two holding 100 at 3/4", y.Slots())
	}
}

// TestFindAllocatesNothing checks the lookup of a full index.
func TestFindAllocatesNothing(t *testing.T) {
	x := New(1000)
	for i := range int64(1000) {
		x.Insert(i*31, Hash(uint64(i*31)), int32(i))
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := range int64(1000) {
			if r, ok := x.Find(i*31, Hash(uint64(i*31))); !ok || r != int32(i) {
				t.Fatalf("Find(%d) = %d, %v", i*31, r, ok)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 1000 finds", allocs)
	}
}

// TestFindCountAllocatesNothing checks the counted lookup of a full index.
func TestFindCountAllocatesNothing(t *testing.T) {
	x := New(1000)
	for i := range int64(1000) {
		x.Insert(i*31, Hash(uint64(i*31)), int32(i))
	}
	allocs := testing.AllocsPerRun(100, func() {
		for i := range int64(1000) {
			if r, ok := x.FindCount(i*31, Hash(uint64(i*31))); !ok || r != int32(i) {
				t.Fatalf("FindCount(%d) = %d, %v", i*31, r, ok)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per 1000 counted finds", allocs)
	}
	if c := x.Count(31, Hash(31)); c != 101 {
		t.Fatalf("count %d after 101 runs; want 101", c)
	}
}
