package embedding

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// incRows returns a snapshot's rows by id: value and slots, freq, version.
func incRows(s *Snapshot) map[int64][]float32 {
	out := map[int64][]float32{}
	d := s.Dim
	for i, id := range s.IDs {
		row := slices.Clone(s.Values[i*d : (i+1)*d])
		for _, slot := range s.Slots {
			row = append(row, slot[i*d:(i+1)*d]...)
		}
		out[id] = append(row, float32(s.Freqs[i]), float32(s.Versions[i]))
	}
	return out
}

// TestIncrement: ChangedSince holds exactly the rows updated at its
// version or later, new rows among them; a full snapshot restored, then
// the increment applied, is the table.
func TestIncrement(t *testing.T) {
	opts := Options{Dim: 2, Slots: []float32{0.1}, Init: Initializer{UniformLimit: 0.1, Seed: 3}}
	tab, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(mix(uint64(i)))
	}
	grads := func(n int) []float32 {
		g := make([]float32, 2*n)
		for i := range g {
			g[i] = float32(i%5) * 0.1
		}
		return g
	}
	out := make([]float32, 2*len(ids))
	tab.Gather(ids, out)
	tab.ApplyAdagrad(ids, grads(len(ids)), 0.5, 1)
	full := tab.Snapshot()

	touched := append(slices.Clone(ids[10:20]), 42, -7) // two new rows
	tab.Gather(touched, out[:2*len(touched)])
	tab.ApplyAdagrad(touched[:6], grads(6), 0.5, 5)
	tab.ApplyAdagrad(touched[6:], grads(len(touched)-6), 0.5, 6)
	inc := tab.ChangedSince(5)
	got := slices.Sorted(slices.Values(inc.IDs))
	if want := slices.Sorted(slices.Values(touched)); !slices.Equal(got, want) {
		t.Fatalf("increment since 5 holds %d rows %v, want the %d touched %v", len(got), got, len(want), want)
	}
	if n := len(tab.ChangedSince(7).IDs); n != 0 {
		t.Errorf("increment since 7 holds %d rows, want none", n)
	}

	restored, _ := New(opts)
	if err := restored.Restore(full); err != nil {
		t.Fatal(err)
	}
	if err := restored.Apply(inc); err != nil {
		t.Fatal(err)
	}
	if want, got := incRows(tab.Snapshot()), incRows(restored.Snapshot()); !maps.EqualFunc(want, got, slices.Equal) {
		t.Errorf("full checkpoint and increment restored: %d rows, the table %d, or rows differ", len(got), len(want))
	}

	bad := tab.ChangedSince(5)
	bad.Versions = bad.Versions[1:]
	before := incRows(restored.Snapshot())
	if err := restored.Apply(bad); !errors.Is(err, ErrMismatch) {
		t.Errorf("an increment with a version missing: %v, want ErrMismatch", err)
	}
	if !maps.EqualFunc(before, incRows(restored.Snapshot()), slices.Equal) {
		t.Error("a refused increment changed the table")
	}
}
