package idindex

import (
	"math/rand/v2"
	"testing"
)

// TestAgainstMap runs random inserts, moves and removes of ids from a
// small range (so that probes collide, wrap and shift) against a map.
func TestAgainstMap(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 7))
		var x Index
		if seed%2 == 1 {
			x = New(int(seed * 10))
		}
		model := map[int64]int32{}
		for step := range 5000 {
			id := r.Int64N(300) - 150
			h := Hash(uint64(id))
			row, in := model[id]
			switch r.IntN(4) {
			case 0, 1:
				if !in {
					row = int32(r.IntN(1 << 20))
					x.Insert(id, h, row)
					model[id] = row
				}
			case 2:
				if in {
					x.Remove(id, h)
					delete(model, id)
				}
			case 3:
				if in {
					model[id] = row + 1
					x.SetRow(id, h, row+1)
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
				if ok != in || got != want {
					t.Fatalf("seed %d step %d: Find(%d) = %d, %v; want %d, %v", seed, step, k, got, ok, want, in)
				}
			}
		}
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
