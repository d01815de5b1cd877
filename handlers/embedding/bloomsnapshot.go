package embedding

import "math"

// A snapshot of a table with a Bloom filter holds its counters, part
// after part (see bloomParts), Counters (rounded up to a multiple of the
// parts) in all;
// a restore takes them back, so that ids seen before a checkpoint count
// towards admission after it. Counters of another size, a filter
// configured otherwise than the one saved, cannot be mapped onto the
// table's: the restore starts its filter empty, as it would without
// them.

// restoreBloom sets t's counters to counts, when they fit; t is not yet
// in use.
func (t *Table) restoreBloom(counts []uint8) {
	if t.opts.Bloom == nil {
		return
	}
	per := t.opts.Bloom.perPart() * partsPerShard
	if len(counts) != per*numShards {
		return
	}
	for i := range t.shards {
		copy(t.shards[i].bloom.counts, counts[i*per:(i+1)*per])
	}
}

// MergeBloom adds the counters of src to dst, saturating: the filter of
// ids that either counted, for a restore that joins pieces of a
// checkpoint saved by several tables (each id then counts as often as in
// its own piece, or more, when other pieces' ids share its counters: an
// id may be admitted early, never late).
func MergeBloom(dst, src []uint8) {
	for i, c := range src[:min(len(src), len(dst))] {
		dst[i] = uint8(min(int(dst[i])+int(c), math.MaxUint8))
	}
}
