package embedding

import (
	"slices"
	"testing"
)

type recorder struct {
	evicted  []int64
	replaced int
}

func (r *recorder) Evicted(ids []int64) { r.evicted = append(r.evicted, ids...) }
func (r *recorder) Replaced()           { r.replaced++ }

// TestObserver: Evict reports exactly the ids it removed; Restore and
// Apply report a replacement; Remove deletes rows and tells no one.
func TestObserver(t *testing.T) {
	tab, err := New(Options{Dim: 2, Slots: []float32{0.1}})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	tab.Observe(&rec)
	ids := []int64{1, 2, 3, 4, 5, 6}
	tab.Gather(ids, make([]float32, 2*len(ids)))
	tab.ApplyAdagrad(ids[:3], make([]float32, 6), 0.1, 10) // 1, 2, 3 at step 10; the rest at 0
	if n := tab.Evict(20, 15, 0); n != 3 {
		t.Fatalf("Evict removed %d rows, want 3", n)
	}
	slices.Sort(rec.evicted)
	if !slices.Equal(rec.evicted, []int64{4, 5, 6}) || rec.replaced != 0 {
		t.Fatalf("observer heard evicted %v, replaced %d; want [4 5 6], 0", rec.evicted, rec.replaced)
	}
	if err := tab.Restore(tab.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if rec.replaced != 1 {
		t.Fatalf("Restore: replaced %d, want 1", rec.replaced)
	}
	if err := tab.Apply(tab.ChangedSince(0)); err != nil || rec.replaced < 2 {
		t.Fatalf("Apply: %v, replaced %d, want 2 or more", err, rec.replaced)
	}
	if n := tab.Remove([]int64{1, 3, 3, 99}); n != 2 || tab.Len() != 1 {
		t.Fatalf("Remove took %d rows, %d left; want 2 and 1", n, tab.Len())
	}
	if got := tab.Snapshot().IDs; !slices.Equal(got, []int64{2}) || len(rec.evicted) != 3 {
		t.Fatalf("after Remove: rows %v, evicted heard %v; want [2] and no more", got, rec.evicted)
	}
}
