package embedding

import (
	"fmt"
	"slices"

	"github.com/starwire/starwire/internal/idindex"
)

// A Snapshot is a table's contents, as a checkpoint holds them under
// DeepRec's names (<var>-keys, -values, -freqs, -versions, and the slots'
// and the _filtered tensors of ids not yet admitted). Row i is IDs[i],
// Values[i*Dim:][:Dim], each slot's Slots[s][i*Dim:][:Dim], Freqs[i] and
// Versions[i].
type Snapshot struct {
	Dim      int
	IDs      []int64
	Values   []float32
	Slots    [][]float32
	Freqs    []int64
	Versions []int64
	// FilteredIDs are the ids looked up but not admitted, FilteredFreqs
	// their lookups. A table counting them in a Bloom filter has none: its
	// snapshot holds the filter's counters instead, in Bloom.
	FilteredIDs   []int64
	FilteredFreqs []int64
	// Bloom is the counting Bloom filter's counters, of a table that has
	// one (see bloomsnapshot.go).
	Bloom []uint8
}

// Snapshot returns the table's contents. It takes the shards one at a
// time, so concurrent calls go on in the others; every row's value,
// slots, count and version are of one moment.
func (t *Table) Snapshot() *Snapshot {
	d := t.opts.Dim
	s := &Snapshot{Dim: d, Slots: make([][]float32, len(t.opts.Slots))}
	// Room for the rows there are now, so that a large table's snapshot
	// is not copied again and again as it grows (rows added meanwhile
	// grow it by append).
	s.grow(t.Len())
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		s.IDs = append(s.IDs, sh.ids...)
		s.Freqs = t.freqs(sh, s.Freqs)
		s.Values = append(s.Values, sh.vals...)
		for r := range int32(len(sh.ids)) {
			s.Versions = append(s.Versions, *t.version(sh, r))
			for k := range s.Slots {
				s.Slots[k] = append(s.Slots[k], t.slot(sh, r, k)...)
			}
		}
		for id, n := range sh.pending {
			s.FilteredIDs = append(s.FilteredIDs, id)
			s.FilteredFreqs = append(s.FilteredFreqs, n)
		}
		if sh.bloom != nil {
			s.Bloom = append(s.Bloom, sh.bloom.counts...)
		}
		sh.mu.Unlock()
	}
	return s
}

// freqs appends to dst the lookup counts of sh's rows, by row, and
// returns it; the caller holds sh.mu. The counts are in the index slots:
// it takes them in one pass over the slots in order, writing each at its
// row, rather than a probe of the index per row.
func (t *Table) freqs(sh *shard, dst []int64) []int64 {
	n := len(dst)
	dst = slices.Grow(dst, len(sh.ids))[:n+len(sh.ids)]
	freqs := dst[n:]
	sh.idx.All(func(_ int64, r int32, c uint32) { freqs[r] = int64(c) })
	return dst
}

// grow makes room in s for n more rows.
func (s *Snapshot) grow(n int) {
	s.IDs = slices.Grow(s.IDs, n)
	s.Values = slices.Grow(s.Values, n*s.Dim)
	for k := range s.Slots {
		s.Slots[k] = slices.Grow(s.Slots[k], n*s.Dim)
	}
	s.Freqs = slices.Grow(s.Freqs, n)
	s.Versions = slices.Grow(s.Versions, n)
}

// check reports what in s does not fit t, naming the tensor.
func (t *Table) check(s *Snapshot) error {
	if err := t.checkShape(s); err != nil {
		return err
	}
	return checkUnique(s.IDs)
}

// checkShape reports what in s does not fit t but a key held twice.
func (t *Table) checkShape(s *Snapshot) error {
	switch d := t.opts.Dim; {
	case s.Dim != d:
		return fmt.Errorf("embedding: snapshot of dimension %d for a table of %d: %w", s.Dim, d, ErrMismatch)
	case len(s.Slots) != len(t.opts.Slots):
		return fmt.Errorf("embedding: %d slots for a table of %d: %w", len(s.Slots), len(t.opts.Slots), ErrMismatch)
	}
	return s.checkLengths()
}

// checkLengths reports which of s's tensors disagrees in length with its
// keys.
func (s *Snapshot) checkLengths() error {
	n, d := len(s.IDs), s.Dim
	switch {
	case len(s.Values) != n*d:
		return fmt.Errorf("embedding: %d keys but %d values of %d: %w", n, len(s.Values), d, ErrMismatch)
	case len(s.Freqs) != n || len(s.Versions) != n:
		return fmt.Errorf("embedding: %d keys but %d freqs and %d versions: %w", n, len(s.Freqs), len(s.Versions), ErrMismatch)
	case len(s.FilteredIDs) != len(s.FilteredFreqs):
		return fmt.Errorf("embedding: %d filtered keys but %d filtered freqs: %w", len(s.FilteredIDs), len(s.FilteredFreqs), ErrMismatch)
	}
	for k, slot := range s.Slots {
		if len(slot) != n*d {
			return fmt.Errorf("embedding: %d keys but %d values of slot %d: %w", n, len(slot), k, ErrMismatch)
		}
	}
	return nil
}

// checkUnique reports a key that ids hold twice.
func checkUnique(ids []int64) error {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return fmt.Errorf("embedding: key %d is in the snapshot twice: %w", sorted[i], ErrMismatch)
		}
	}
	return nil
}

// Restore replaces the table's contents with s's. A row's lookup count is
// kept in 32 bits: a freq above math.MaxUint32 is restored as that (and
// counts no further), a negative one as 0. A snapshot that does
// not fit is refused before anything changes; otherwise the new shards are
// built beside the old and swapped in under every shard's lock, so no call
// sees a table half restored.
func (t *Table) Restore(s *Snapshot) error {
	if err := t.checkShape(s); err != nil {
		return err
	}
	fresh := t.sized(s.IDs)
	for lo := 0; lo < len(s.IDs); lo += restoreBatch {
		if err := fresh.restoreRows(s, lo, min(lo+restoreBatch, len(s.IDs))); err != nil {
			return err
		}
	}
	for i, id := range s.FilteredIDs {
		fresh.shards[shardOf(mix(uint64(id)))].pending[id] = s.FilteredFreqs[i]
	}
	fresh.restoreBloom(s.Bloom)
	t.swapIn(fresh)
	return nil
}

// restoreBatch is the rows restoreRows adds at a time.
const restoreBatch = 256

// restoreRows adds rows lo to hi of s to t, which no other call uses yet.
// The index slots of a large table's random ids are cache and TLB misses;
// so, as each does, it first loads every row's home slot, then adds the
// rows (their slots cached): the loads of the first pass do not depend on
// each other, and the processor overlaps their misses.
func (t *Table) restoreRows(s *Snapshot, lo, hi int) error {
	var home int64
	for _, id := range s.IDs[lo:hi] {
		h := mix(uint64(id))
		home += t.shards[shardOf(h)].idx.home(h)
	}
	d := t.opts.Dim
	for i := lo; i < hi; i++ {
		id := s.IDs[i]
		h := mix(uint64(id))
		sh := &t.shards[shardOf(h)]
		if _, ok := sh.idx.find(id, h); ok {
			return fmt.Errorf("embedding: key %d is in the snapshot twice: %w", id, ErrMismatch)
		}
		r := t.add(sh, id, h, s.Freqs[i])
		*t.version(sh, r) = s.Versions[i]
		copy(t.val(sh, r), s.Values[i*d:])
		for k := range s.Slots {
			copy(t.slot(sh, r, k), s.Slots[k][i*d:])
		}
	}
	t.sink += home
	return nil
}

// sized returns an empty table of t's options whose shards have room
// for ids, so that a restore neither copies the slabs as they grow nor
// rehashes the index.
func (t *Table) sized(ids []int64) *Table {
	fresh, _ := New(t.opts)
	var count [numShards]int
	for _, id := range ids {
		count[shardOf(mix(uint64(id)))]++
	}
	for i := range fresh.shards {
		sh := &fresh.shards[i]
		sh.idx.Index = idindex.New(count[i])
		sh.ids = make([]int64, 0, count[i])
		sh.vals = make([]float32, 0, count[i]*t.opts.Dim)
		sh.rest = make([]float32, 0, count[i]*t.rest)
	}
	return fresh
}

// swapIn replaces t's contents with fresh's under every shard's lock.
func (t *Table) swapIn(fresh *Table) {
	for i := range t.shards {
		t.shards[i].mu.Lock()
	}
	for i := range t.shards {
		sh, f := &t.shards[i], &fresh.shards[i]
		sh.idx, sh.ids, sh.vals, sh.rest, sh.pending, sh.bloom = f.idx, f.ids, f.vals, f.rest, f.pending, f.bloom
	}
	if o := t.observing(); o != nil {
		o.Replaced()
	}
	for i := range t.shards {
		t.shards[i].mu.Unlock()
	}
}
