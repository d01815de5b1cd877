package embedding

import (
	"fmt"
	"slices"
)

// SavedParts is the number of parts a checkpoint of an embedding variable
// groups its rows in, by id (DeepRec's kSavedPartitionNum): row i of part
// p is row Offsets[p]+i of the saved tensors, so that a restore reads only
// the parts it takes.
//
// The partition rule: the part of an id is PartOf(id), its id modulo
// SavedParts (taken non-negative); restoring into partition k of n
// variables (n ps tasks, or a partitioned variable's n pieces) takes the
// parts p with p mod n = k, from every piece the checkpoint holds. So an
// id lands in partition PartOf(id) mod n whatever number of pieces saved
// it; that is id mod n, DeepRec's "mod" partition of lookups, when n
// divides SavedParts.
const SavedParts = 1000

// PartOf returns the saved part of id.
func PartOf(id int64) int {
	p := id % SavedParts
	if p < 0 {
		p += SavedParts
	}
	return int(p)
}

// PartitionOf returns the partition of n that id is restored into.
func PartitionOf(id int64, n int) int { return PartOf(id) % n }

// Partition orders s's rows, and its filtered ids, by part, keeping their
// order within a part, and returns the offsets of each part's first row
// and first filtered id: SavedParts+1 each, the last being their number.
// They are the -partition_offset and -partition_filter_offset tensors.
func (s *Snapshot) Partition() (offsets, filteredOffsets []int32) {
	dest, offsets := byPart(s.IDs)
	d := s.Dim
	s.IDs = permute(s.IDs, dest, 1)
	s.Values = permute(s.Values, dest, d)
	for k := range s.Slots {
		s.Slots[k] = permute(s.Slots[k], dest, d)
	}
	s.Freqs = permute(s.Freqs, dest, 1)
	s.Versions = permute(s.Versions, dest, 1)
	fdest, filteredOffsets := byPart(s.FilteredIDs)
	s.FilteredIDs = permute(s.FilteredIDs, fdest, 1)
	s.FilteredFreqs = permute(s.FilteredFreqs, fdest, 1)
	return offsets, filteredOffsets
}

// byPart returns where each of ids goes in their order by part, stable,
// and the parts' offsets.
func byPart(ids []int64) (dest []int32, offsets []int32) {
	offsets = make([]int32, SavedParts+1)
	for _, id := range ids {
		offsets[PartOf(id)+1]++
	}
	for p := range SavedParts {
		offsets[p+1] += offsets[p]
	}
	next := slices.Clone(offsets[:SavedParts])
	dest = make([]int32, len(ids))
	for i, id := range ids {
		p := PartOf(id)
		dest[i] = next[p]
		next[p]++
	}
	return dest, offsets
}

// permute returns the rows of width w of src, row i moved to row
// dest[i]. It reads src in order and scatters the writes: a random read
// of a large snapshot's row waits for its cache and TLB misses, a random
// write does not (measured: a save of 10M rows spent most of its time in
// the reads of a gather by the inverse order).
func permute[T any](src []T, dest []int32, w int) []T {
	if len(src) != len(dest)*w {
		return src // a snapshot that does not fit; check refuses it
	}
	dst := make([]T, len(src))
	for i, j := range dest {
		copy(dst[int(j)*w:(int(j)+1)*w], src[i*w:(i+1)*w])
	}
	return dst
}

// checkOffsets reports whether offsets are SavedParts+1 non-decreasing
// offsets from 0 to n.
func checkOffsets(offsets []int32, n int, what string) error {
	if len(offsets) != SavedParts+1 {
		return fmt.Errorf("embedding: %s has %d offsets, want %d: %w", what, len(offsets), SavedParts+1, ErrMismatch)
	}
	if offsets[0] != 0 || int(offsets[SavedParts]) != n {
		return fmt.Errorf("embedding: %s runs from %d to %d over %d rows: %w", what, offsets[0], offsets[SavedParts], n, ErrMismatch)
	}
	for p := range SavedParts {
		if offsets[p+1] < offsets[p] {
			return fmt.Errorf("embedding: %s decreases at part %d: %w", what, p, ErrMismatch)
		}
	}
	return nil
}

// Select appends to dst the rows, and filtered ids, of s that partition
// k of n takes (see SavedParts), s being a piece of a checkpoint whose
// parts begin at offsets and filteredOffsets, as Partition returned them;
// nil offsets mean a piece saved without them, whose rows are chosen one
// by one. Rows in a part other than the one its offsets place it in are
// refused, as are offsets that do not fit s. An empty dst that takes
// every row of s shares their memory with s.
func (s *Snapshot) Select(dst *Snapshot, offsets, filteredOffsets []int32, k, n int) error {
	if n < 1 || k < 0 || k >= n {
		return fmt.Errorf("embedding: partition %d of %d: %w", k, n, ErrMismatch)
	}
	if err := s.checkLengths(); err != nil {
		return err
	}
	if s.Dim != dst.Dim || len(s.Slots) != len(dst.Slots) {
		return fmt.Errorf("embedding: a piece of dimension %d with %d slots for one of %d with %d: %w", s.Dim, len(s.Slots), dst.Dim, len(dst.Slots), ErrMismatch)
	}
	switch taken := countRows(s.IDs, offsets, k, n); {
	case taken == len(s.IDs) && len(dst.IDs) == 0:
		// Every row, into an empty dst (one piece restored into one
		// partition): dst takes s's rows as they are, rather than
		// copying a piece of millions of rows.
		if err := selectRows(s.IDs, offsets, k, n, "partition_offset", func(int) {}); err != nil {
			return err
		}
		dst.takeRows(s)
	default:
		// Room for the rows taken first, so that dst is not copied
		// again and again as it grows.
		dst.grow(taken)
		if err := selectRows(s.IDs, offsets, k, n, "partition_offset", func(i int) { dst.appendRow(s, i) }); err != nil {
			return err
		}
	}
	return selectRows(s.FilteredIDs, filteredOffsets, k, n, "partition_filter_offset", func(i int) {
		dst.FilteredIDs = append(dst.FilteredIDs, s.FilteredIDs[i])
		dst.FilteredFreqs = append(dst.FilteredFreqs, s.FilteredFreqs[i])
	})
}

// countRows returns the number of ids selectRows takes, or 0 for
// offsets it refuses.
func countRows(ids []int64, offsets []int32, k, n int) int {
	m := 0
	if offsets == nil {
		for _, id := range ids {
			if PartitionOf(id, n) == k {
				m++
			}
		}
		return m
	}
	if len(offsets) != SavedParts+1 {
		return 0
	}
	for p := k; p < SavedParts; p += n {
		m += max(0, int(offsets[p+1])-int(offsets[p]))
	}
	return min(m, len(ids))
}

// selectRows calls take for each of ids in partition k of n.
func selectRows(ids []int64, offsets []int32, k, n int, what string, take func(i int)) error {
	if offsets == nil {
		for i, id := range ids {
			if PartitionOf(id, n) == k {
				take(i)
			}
		}
		return nil
	}
	if err := checkOffsets(offsets, len(ids), what); err != nil {
		return err
	}
	for p := k; p < SavedParts; p += n {
		for i := offsets[p]; i < offsets[p+1]; i++ {
			if PartOf(ids[i]) != p {
				return fmt.Errorf("embedding: key %d is in part %d of %s, belongs in %d: %w", ids[i], p, what, PartOf(ids[i]), ErrMismatch)
			}
			take(int(i))
		}
	}
	return nil
}

// takeRows makes s's rows src's, sharing their memory; s's slices are
// clipped, so that what is appended to them later is s's own.
func (s *Snapshot) takeRows(src *Snapshot) {
	s.IDs, s.Values, s.Freqs, s.Versions = slices.Clip(src.IDs), slices.Clip(src.Values), slices.Clip(src.Freqs), slices.Clip(src.Versions)
	for k := range s.Slots {
		s.Slots[k] = slices.Clip(src.Slots[k])
	}
}

// appendRow appends row i of src to s.
func (s *Snapshot) appendRow(src *Snapshot, i int) {
	d := s.Dim
	s.IDs = append(s.IDs, src.IDs[i])
	s.Values = append(s.Values, src.Values[i*d:(i+1)*d]...)
	for k := range s.Slots {
		s.Slots[k] = append(s.Slots[k], src.Slots[k][i*d:(i+1)*d]...)
	}
	s.Freqs = append(s.Freqs, src.Freqs[i])
	s.Versions = append(s.Versions, src.Versions[i])
}
