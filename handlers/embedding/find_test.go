package embedding

import (
	"errors"
	"slices"
	"testing"
)

// TestFindLeavesTheTable: Find reads the rows Gather made and the
// initializer's value for the others, and makes no row, counts no lookup.
func TestFindLeavesTheTable(t *testing.T) {
	tab, err := New(Options{Dim: 2, FilterFreq: 2, Init: Initializer{Constant: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 4)
	for range 2 {
		if err := tab.Gather([]int64{7}, out[:2]); err != nil {
			t.Fatal(err)
		}
	}
	if tab.Len() != 1 {
		t.Fatalf("%d rows after two lookups of id 7 with filter 2, want 1", tab.Len())
	}
	for range 3 {
		if err := tab.Find([]int64{7, 9}, out); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(out, []float32{0.5, 0.5, 0.5, 0.5}) {
		t.Errorf("found %v", out)
	}
	if tab.Len() != 1 {
		t.Errorf("%d rows after finding id 9, want 1", tab.Len())
	}
	s := tab.Snapshot()
	if !slices.Equal(s.Freqs, []int64{2}) || len(s.FilteredIDs) != 0 {
		t.Errorf("freqs %v, filtered %v after Find: it counted lookups", s.Freqs, s.FilteredIDs)
	}
	// Admission goes on from Gather's count alone.
	tab.Gather([]int64{9}, out[:2])
	if tab.Len() != 1 {
		t.Errorf("id 9 admitted after one Gather and three Finds")
	}
	if err := tab.Find([]int64{1}, out); !errors.Is(err, ErrMismatch) {
		t.Errorf("find of 1 id into 4 floats: %v, want ErrMismatch", err)
	}
}
