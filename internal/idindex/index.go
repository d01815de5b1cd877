// Package idindex maps int64 ids to int32 rows with open addressing: the
// index of a table that keeps its rows in slabs of its own (an embedding
// variable's shard, a MutableHashTable's), where a Go map's buckets and
// overflow chains would cost more memory and cache misses per lookup.
//
// Linear probing over a power-of-two number of slots kept at most 3/4
// full, with deletion by backward shift (no tombstones, so a lookup's
// probe never grows with the removes before it). A slot holds an id, its
// row plus one and a lookup count, 16 bytes, four to a cache line; row 0
// marks it empty. The count is the caller's (a table's lookups of the id,
// kept in the slot a lookup has cached anyway rather than in a line of its
// own): an Index only keeps it with its id through grows and removes of
// other ids, and counts a lookup in FindCount. It is a uint32 that
// saturates: it stays at math.MaxUint32 once there.
// An id's home slot is the low bits of its hash, Hash(id): a caller that
// spreads ids over shards by the hash's high bits computes it once and
// passes it to every call. An Index is not safe for concurrent use.
package idindex

import "math"

// Hash is the hash an Index expects with each id: splitmix64's
// finalizer, a bijection of uint64 whose every output bit depends on
// every input bit, so that sequential or clustered ids spread evenly.
func Hash(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// An Index is the rows of a set of ids. The zero value is empty and
// ready: its first Insert allocates.
type Index struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	key   int64
	row   int32  // the row plus one; 0: empty
	count uint32 // the caller's lookups of key, saturating
}

// SlotBytes is the memory of one slot, for callers that count their bytes.
const SlotBytes = 16

// minSlots is the slots of an index's first allocation.
const minSlots = 8

// New returns an empty index with room for n ids before it grows.
func New(n int) Index {
	slots := minSlots
	for 3*slots < 4*n {
		slots *= 2
	}
	var x Index
	x.init(slots)
	return x
}

func (x *Index) init(slots int) {
	x.slots, x.mask, x.n = make([]slot, slots), uint64(slots-1), 0
}

// Len returns the number of ids in x.
func (x *Index) Len() int { return x.n }

// Slots returns the number of slots x has allocated.
func (x *Index) Slots() int { return len(x.slots) }

// Home returns the key of h's home slot, the load a caller makes ahead
// of Find so that the cache misses of a batch's ids overlap.
func (x *Index) Home(h uint64) int64 {
	if len(x.slots) == 0 {
		return 0
	}
	return x.slots[h&x.mask].key
}

// Find returns id's row; h is Hash(uint64(id)).
func (x *Index) Find(id int64, h uint64) (int32, bool) {
	if s := x.lookup(id, h); s != nil {
		return s.row - 1, true
	}
	return 0, false
}

// FindCount returns id's row, as Find does, and counts a lookup of id
// when it is in x (the count saturates at math.MaxUint32).
func (x *Index) FindCount(id int64, h uint64) (int32, bool) {
	s := x.lookup(id, h)
	if s == nil {
		return 0, false
	}
	if s.count != math.MaxUint32 {
		s.count++
	}
	return s.row - 1, true
}

// lookup returns id's slot, nil when id is not in x.
func (x *Index) lookup(id int64, h uint64) *slot {
	if len(x.slots) == 0 {
		return nil
	}
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch s := &x.slots[i]; {
		case s.row == 0:
			return nil
		case s.key == id:
			return s
		}
	}
}

// Insert adds id, which is not in x, at row r (at least 0), with a count
// of 0.
func (x *Index) Insert(id int64, h uint64, r int32) { x.InsertCount(id, h, r, 0) }

// InsertCount adds id, which is not in x, at row r (at least 0), with a
// count of n.
func (x *Index) InsertCount(id int64, h uint64, r int32, n uint32) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	x.put(slot{key: id, row: r + 1, count: n}, h)
	x.n++
}

// put writes s, whose key's hash is h, into the first empty slot of its
// probe.
func (x *Index) put(s slot, h uint64) {
	i := h & x.mask
	for x.slots[i].row != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = s
}

// grow doubles the slots.
func (x *Index) grow() {
	old, n := x.slots, x.n
	x.init(max(2*len(old), minSlots))
	for _, s := range old {
		if s.row != 0 {
			x.put(s, Hash(uint64(s.key)))
		}
	}
	x.n = n
}

// Count returns the count of id, which is in x.
func (x *Index) Count(id int64, h uint64) uint32 { return x.slots[x.slotOf(id, h)].count }

// SetCount sets the count of id, which is in x, to n.
func (x *Index) SetCount(id int64, h uint64, n uint32) { x.slots[x.slotOf(id, h)].count = n }

// All calls f with the id, row and count of every id in x, in the order of
// their slots: one sequential pass over x's memory, as a snapshot of a
// large table wants it, rather than a probe per id.
func (x *Index) All(f func(id int64, row int32, count uint32)) {
	for i := range x.slots {
		if s := &x.slots[i]; s.row != 0 {
			f(s.key, s.row-1, s.count)
		}
	}
}

// slotOf returns the slot holding id, which is in x.
func (x *Index) slotOf(id int64, h uint64) uint64 {
	i := h & x.mask
	for x.slots[i].key != id || x.slots[i].row == 0 {
		i = (i + 1) & x.mask
	}
	return i
}

// SetRow records that id, which is in x, is now at row r; its count stays.
func (x *Index) SetRow(id int64, h uint64, r int32) { x.slots[x.slotOf(id, h)].row = r + 1 }

// Remove deletes id, which is in x, shifting back the ids after it whose
// probe passed its slot.
func (x *Index) Remove(id int64, h uint64) {
	i := x.slotOf(id, h)
	for j := (i + 1) & x.mask; x.slots[j].row != 0; j = (j + 1) & x.mask {
		home := Hash(uint64(x.slots[j].key)) & x.mask
		// The id at j may move to the hole at i if its home is not in
		// the cyclic range (i, j].
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = slot{}
	x.n--
}
