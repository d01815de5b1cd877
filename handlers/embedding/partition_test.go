package embedding

import (
	"errors"
	"slices"
	"testing"
)

// TestPartitionSelect orders a snapshot by part and takes it back as 1,
// 2, 3 and 7 partitions: every row, and every filtered id, lands once, in
// PartitionOf its id, with its own value, slot, freq and version; negative
// ids too.
func TestPartitionSelect(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0.1}, Init: Initializer{UniformLimit: 1, Seed: 3}, FilterFreq: 2})
	var ids []int64
	for i := range int64(3000) {
		ids = append(ids, i*7919-5_000_000)
	}
	gather(t, tab, ids...)
	gather(t, tab, ids[:2000]...) // admitted; the rest stay filtered
	if _, err := tab.ApplyAdagrad(ids[:500], make([]float32, 1000), 0.1, 9); err != nil {
		t.Fatal(err)
	}
	s := tab.Snapshot()
	want := rowsOf(s)
	offsets, filtered := s.Partition()
	for i := 1; i < len(s.IDs); i++ {
		if PartOf(s.IDs[i]) < PartOf(s.IDs[i-1]) {
			t.Fatalf("row %d of part %d after one of part %d", i, PartOf(s.IDs[i]), PartOf(s.IDs[i-1]))
		}
	}
	if !equalRows(rowsOf(s), want) {
		t.Fatal("Partition changed rows")
	}
	for _, n := range []int{1, 2, 3, 7} {
		got := map[int64][]float32{}
		var filteredIDs []int64
		for k := range n {
			dst := &Snapshot{Dim: 2, Slots: make([][]float32, 1)}
			if err := s.Select(dst, offsets, filtered, k, n); err != nil {
				t.Fatal(err)
			}
			for id, r := range rowsOf(dst) {
				if PartitionOf(id, n) != k {
					t.Fatalf("%d partitions: id %d in %d, belongs in %d", n, id, k, PartitionOf(id, n))
				}
				got[id] = r
			}
			filteredIDs = append(filteredIDs, dst.FilteredIDs...)
			// Without offsets, rows are chosen one by one, to the same end.
			plain := &Snapshot{Dim: 2, Slots: make([][]float32, 1)}
			if err := s.Select(plain, nil, nil, k, n); err != nil || !equalRows(rowsOf(plain), rowsOf(dst)) {
				t.Fatalf("%d partitions, partition %d: without offsets %v, or other rows", n, k, err)
			}
		}
		slices.Sort(filteredIDs)
		if !equalRows(got, want) || len(filteredIDs) != 1000 || !slices.Equal(filteredIDs, slices.Sorted(slices.Values(s.FilteredIDs))) {
			t.Fatalf("%d partitions: %d rows of %d, %d filtered ids of 1000", n, len(got), len(want), len(filteredIDs))
		}
	}
}

// TestSelectRefusesBadOffsets checks offsets that do not fit the rows,
// and rows in the wrong part, are refused.
func TestSelectRefusesBadOffsets(t *testing.T) {
	tab := newTable(t, Options{Dim: 1})
	gather(t, tab, 1, 2, 1001)
	s := tab.Snapshot()
	offsets, filtered := s.Partition()
	bad := map[string][]int32{
		"short":      offsets[:10],
		"too few":    append(slices.Clone(offsets[:SavedParts]), 2),
		"decreasing": func() []int32 { o := slices.Clone(offsets); o[500] = 3; o[501] = 1; return o }(),
		"wrong part": func() []int32 { o := slices.Clone(offsets); o[2] = 1; return o }(), // 1001 counted in part 2
	}
	for name, o := range bad {
		dst := &Snapshot{Dim: 1}
		if err := s.Select(dst, o, filtered, 0, 1); !errors.Is(err, ErrMismatch) {
			t.Fatalf("%s offsets: %v, want ErrMismatch", name, err)
		}
	}
	if err := s.Select(&Snapshot{Dim: 1}, offsets, filtered, 2, 2); !errors.Is(err, ErrMismatch) {
		t.Fatalf("partition 2 of 2: %v, want ErrMismatch", err)
	}
}

// TestRestoreSlot checks that a slot restored apart from its rows must
// cover exactly the table's ids, and changes nothing when refused.
func TestRestoreSlot(t *testing.T) {
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0.1, 0.2}})
	gather(t, tab, 1, 2, 3)
	before := rowsOf(tab.Snapshot())
	for name, ids := range map[string][]int64{"missing": {1, 2}, "other": {1, 2, 4}, "twice": {1, 2, 2}} {
		if err := tab.RestoreSlot(1, ids, make([]float32, 2*len(ids))); !errors.Is(err, ErrMismatch) {
			t.Fatalf("%s ids: %v, want ErrMismatch", name, err)
		}
	}
	if err := tab.RestoreSlot(1, []int64{1, 2, 3}, make([]float32, 4)); !errors.Is(err, ErrMismatch) {
		t.Fatalf("short values: %v, want ErrMismatch", err)
	}
	if !equalRows(rowsOf(tab.Snapshot()), before) {
		t.Fatal("a refused RestoreSlot changed rows")
	}
	if err := tab.RestoreSlot(1, []int64{3, 1, 2}, []float32{3, 3, 1, 1, 2, 2}); err != nil {
		t.Fatal(err)
	}
	for id, r := range rowsOf(tab.Snapshot()) {
		if want := []float32{0, 0, 0.1, 0.1, float32(id), float32(id)}; !slices.Equal(r, want) {
			t.Fatalf("row %d = %v, want %v", id, r, want)
		}
	}
}

// TestSelectAllThenMore takes every row of one piece into an empty
// snapshot (which then shares the piece's memory) and appends a second
// piece's: both pieces' rows land, and the first piece is left as it was.
func TestSelectAllThenMore(t *testing.T) {
	piece := func(ids ...int64) *Snapshot {
		s := &Snapshot{Dim: 1, IDs: ids, Slots: [][]float32{nil}}
		for _, id := range ids {
			s.Values = append(s.Values, float32(id))
			s.Slots[0] = append(s.Slots[0], -float32(id))
			s.Freqs, s.Versions = append(s.Freqs, id), append(s.Versions, 2*id)
		}
		s.IDs = slices.Grow(s.IDs, 10) // room an append could write into
		return s
	}
	a, b := piece(1, 2, 3), piece(4, 5)
	dst := &Snapshot{Dim: 1, Slots: make([][]float32, 1)}
	for _, p := range []*Snapshot{a, b} {
		if err := p.Select(dst, nil, nil, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(dst.IDs, []int64{1, 2, 3, 4, 5}) || !slices.Equal(dst.Slots[0], []float32{-1, -2, -3, -4, -5}) || !slices.Equal(dst.Versions, []int64{2, 4, 6, 8, 10}) {
		t.Fatalf("took %v, slot %v, versions %v", dst.IDs, dst.Slots[0], dst.Versions)
	}
	if got := a.IDs[:cap(a.IDs)][3]; got != 0 {
		t.Fatalf("the second piece's rows were written into the first's memory (%d)", got)
	}
}
