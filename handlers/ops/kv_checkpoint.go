package ops

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Checkpoints of embedding variables, under DeepRec's names: a variable
// saved under name N is the tensors
//
//	N-keys              [n] of its key dtype
//	N-values            [n, dim] float: the value, or for a slot the slot
//	N-freqs, N-versions [n] int64: lookups and last update's global step
//	N-partition_offset  [1001] int32: where each saved part begins
//	N-keys_filtered, N-freqs_filtered, N-versions_filtered: the ids looked
//	                    up but not yet admitted, and their lookups
//	N-partition_filter_offset [1001] int32
//	N-bloom_counters    [m] uint8: a primary's counting Bloom filter, when
//	                    it counts the ids not admitted in one (starwire's;
//	                    DeepRec saves no filter)
//
// with the rows grouped by part (embedding.SavedParts, the partition rule
// is there). A slot is saved as a variable of its own, as DeepRec saves
// it, from the same snapshot as its primary: one SaveV2 takes one
// snapshot per table, so every row's slots are those of its value.
//
// The names, dtypes, shapes and part order are DeepRec's
// (EmbeddingVarCkptData::ExportToCkpt, Storage::SaveToCheckpoint), and
// TensorFlow's reader and RestoreV2 read them (interop/tf's
// test_ev_checkpoints.py; testdata/ev_checkpoint keeps a checkpoint it
// read and its listing). Where starwire's differs, on purpose:
//
//   - -freqs and -versions always hold a row each. DeepRec leaves them
//     empty unless the variable counts (filter_freq, record_freq) or
//     ages (steps_to_live, record_version) its rows; starwire's table
//     keeps both anyway, and DeepRec restores the full tensors. Empty
//     ones, as DeepRec writes them, restore as zeros (kvReader.recorded).
//   - -versions_filtered holds a zero for each filtered id, where DeepRec
//     writes versions only when it saves them: an id not admitted was
//     never updated, which version 0 says, and DeepRec's restore reads
//     this tensor at the offsets of -keys_filtered whatever its length.
//   - A negative id is saved in part id mod 1000 taken non-negative (-7
//     in part 993), the floor modulo TensorFlow's "mod" lookups shard
//     by. DeepRec truncates (-7 % 1000 is -7, no part) and so drops
//     negative ids at save but those that are multiples of 1000; its
//     restore takes them all into one partition, but into n > 1 only
//     some (it keeps an id in partition k when id % 1000 % n == k, C's
//     remainder, negative). train's hash ids are therefore 63-bit,
//     never negative, so DeepRec restores its checkpoints into any
//     number of partitions.
//   - -bloom_counters is starwire's (DeepRec saves no filter state);
//     DeepRec's restore does not look for it.
//
// KvResourceExport returns the keys, values, versions and freqs of one
// snapshot. KvResourceImportV2 reads them back from a checkpoint, taking
// the rows of its partition_id of partition_num: the checkpoint may hold
// the variable whole (N) or in pieces (N/part_0, N/part_1, ...), saved by
// any number of ps tasks.

const (
	kvKeys            = "-keys"
	kvValues          = "-values"
	kvFreqs           = "-freqs"
	kvVersions        = "-versions"
	kvOffsets         = "-partition_offset"
	kvKeysFiltered    = "-keys_filtered"
	kvFreqsFiltered   = "-freqs_filtered"
	kvVersionFiltered = "-versions_filtered"
	kvFilterOffsets   = "-partition_filter_offset"
	kvBloom           = "-bloom_counters"
	kvPartStr         = "part_"
)

// A kvSaved is one table's snapshot, ordered by part, as a save writes it.
type kvSaved struct {
	snap                     *embedding.Snapshot
	offsets, filteredOffsets []int32
}

// snapshotOf returns the snapshot of t that saves take, from cache when
// one was taken for this save already.
func snapshotOf(cache map[*embedding.Table]*kvSaved, t *embedding.Table) *kvSaved {
	if s, ok := cache[t]; ok {
		return s
	}
	s := &kvSaved{snap: t.Snapshot()}
	s.offsets, s.filteredOffsets = s.snap.Partition()
	cache[t] = s
	return s
}

// bytesTensor is a tensor over s's memory, for a writer that copies it.
func bytesTensor[T tensor.Elem](dt wire.DataType, s []T, shape ...int64) *wire.Tensor {
	return &wire.Tensor{DType: dt, Shape: shape, Data: tensor.Bytes(s)}
}

// keyTensor is ids as a tensor of dtype dt (int32 or int64).
func keyTensor(dt wire.DataType, ids []int64) *wire.Tensor {
	if dt == wire.DTInt64 {
		return bytesTensor(dt, ids, int64(len(ids)))
	}
	k := make([]int32, len(ids))
	for i, id := range ids {
		k[i] = int32(id)
	}
	return bytesTensor(dt, k, int64(len(k)))
}

// writeKv writes v's tensors from s under name.
func writeKv(w *checkpoint.Writer, name string, v *kvVar, slot int, s *kvSaved) error {
	snap := s.snap
	n, m := int64(len(snap.IDs)), int64(len(snap.FilteredIDs))
	values := snap.Values
	if slot >= 0 {
		values = snap.Slots[slot]
	}
	ts := []struct {
		suffix string
		t      *wire.Tensor
	}{
		{kvKeys, keyTensor(v.keyType, snap.IDs)},
		{kvValues, bytesTensor(wire.DTFloat, values, n, int64(snap.Dim))},
		{kvVersions, bytesTensor(wire.DTInt64, snap.Versions, n)},
		{kvFreqs, bytesTensor(wire.DTInt64, snap.Freqs, n)},
		{kvKeysFiltered, keyTensor(v.keyType, snap.FilteredIDs)},
		{kvVersionFiltered, bytesTensor(wire.DTInt64, make([]int64, m), m)},
		{kvFreqsFiltered, bytesTensor(wire.DTInt64, snap.FilteredFreqs, m)},
		{kvOffsets, bytesTensor(wire.DTInt32, s.offsets, int64(len(s.offsets)))},
		{kvFilterOffsets, bytesTensor(wire.DTInt32, s.filteredOffsets, int64(len(s.filteredOffsets)))},
	}
	if slot < 0 && snap.Bloom != nil {
		ts = append(ts, struct {
			suffix string
			t      *wire.Tensor
		}{kvBloom, bytesTensor(wire.DTUint8, snap.Bloom, int64(len(snap.Bloom)))})
	}
	for _, t := range ts {
		if err := w.Add(name+t.suffix, t.t); err != nil {
			return err
		}
	}
	return nil
}

// saveKv writes the embedding variable res under name, evicting first
// (DeepRec's eviction at save) when step is known.
func saveKv(w *checkpoint.Writer, cache map[*embedding.Table]*kvSaved, prefix, name string, res resource, step int64, haveStep bool) error {
	v, ok := res.(*kvVar)
	if !ok {
		return status.Errorf(wire.InvalidArgument, "tensor %q: a resource handle that is not an embedding variable", name)
	}
	t, slot, err := v.kvTable()
	if err != nil {
		return err
	}
	if _, done := cache[t]; !done && haveStep {
		p := v
		if v.primary != nil {
			p = v.primary
		}
		p.mu.Lock()
		stl, minL2 := p.stepsToLive, p.minL2
		p.mu.Unlock()
		t.Evict(step, stl, minL2)
	}
	if err := writeKv(w, name, v, slot, snapshotOf(cache, t)); err != nil {
		return checkpointError(prefix, fmt.Errorf("embedding variable %s: %w", v.name, err))
	}
	return nil
}

// kvPieces returns the names the pieces of the variable saved as name
// are under in r, as DeepRec finds them: a name with a piece's number in
// it, "emb/part_3" or its slot "emb/part_3/Adagrad", stands for every
// piece, part_0, part_1, ... as far as the checkpoint has them, or when
// it has none for the whole, "emb" or "emb/Adagrad"; a name without one
// for its pieces name/part_0, ..., or when there are none for itself.
func kvPieces(r *checkpoint.Reader, name string) []string {
	pre, post, whole := name+"/", "", name
	if i, j, ok := partNumber(name); ok {
		pre, post, whole = name[:i], name[j:], name[:i-1]+name[j:]
	}
	var pieces []string
	for k := 0; ; k++ {
		p := pre + kvPartStr + strconv.Itoa(k) + post
		if _, ok := r.Entry(p + kvKeys); !ok {
			break
		}
		pieces = append(pieces, p)
	}
	if len(pieces) == 0 {
		pieces = []string{whole}
	}
	return pieces
}

// partNumber finds the piece number in name: the last "/part_<digits>"
// followed by "/" or the end; name[i:j] is "part_<digits>".
func partNumber(name string) (i, j int, ok bool) {
	for from := len(name); from > 0; {
		at := strings.LastIndex(name[:from], "/"+kvPartStr)
		if at < 0 {
			return 0, 0, false
		}
		i, j = at+1, at+1+len(kvPartStr)
		for j < len(name) && name[j] >= '0' && name[j] <= '9' {
			j++
		}
		if j > i+len(kvPartStr) && (j == len(name) || name[j] == '/') {
			return i, j, true
		}
		from = at
	}
	return 0, 0, false
}
