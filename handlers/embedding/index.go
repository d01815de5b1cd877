package embedding

// An index maps a shard's ids to their rows: open addressing with linear
// probing over a power-of-two number of slots, kept at most 3/4 full,
// with deletion by backward shift (no tombstones, so a lookup's probe
// never grows with the removes before it). A slot holds an id and its
// row plus one, in one cache line; row 0 marks it empty. An id's home
// slot is the low bits of its hash (the shard is chosen by the high
// bits).
type index struct {
	slots []slot
	mask  uint64
	n     int
}

type slot struct {
	key int64
	row int32 // the row plus one; 0: empty
	_   int32
}

func (x *index) init(slots int) {
	x.slots, x.mask, x.n = make([]slot, slots), uint64(slots-1), 0
}

// home returns the key of h's home slot, the load a caller makes ahead
// of find so that the cache misses of a batch's ids overlap.
func (x *index) home(h uint64) int64 { return x.slots[h&x.mask].key }

// find returns id's row.
func (x *index) find(id int64, h uint64) (int32, bool) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch s := &x.slots[i]; {
		case s.row == 0:
			return 0, false
		case s.key == id:
			return s.row - 1, true
		}
	}
}

// insert adds id, which is not in x, at row r.
func (x *index) insert(id int64, h uint64, r int32) {
	if 4*(x.n+1) > 3*len(x.slots) {
		x.grow()
	}
	i := h & x.mask
	for x.slots[i].row != 0 {
		i = (i + 1) & x.mask
	}
	x.slots[i] = slot{key: id, row: r + 1}
	x.n++
}

// grow doubles the slots.
func (x *index) grow() {
	old := x.slots
	x.init(2 * len(old))
	for _, s := range old {
		if s.row != 0 {
			x.insert(s.key, mix(uint64(s.key)), s.row-1)
		}
	}
}

// slotOf returns the slot holding id, which is in x.
func (x *index) slotOf(id int64, h uint64) uint64 {
	i := h & x.mask
	for x.slots[i].key != id || x.slots[i].row == 0 {
		i = (i + 1) & x.mask
	}
	return i
}

// setRow records that id, which is in x, is now at row r.
func (x *index) setRow(id int64, h uint64, r int32) { x.slots[x.slotOf(id, h)].row = r + 1 }

// remove deletes id, which is in x, shifting back the ids after it whose
// probe passed its slot.
func (x *index) remove(id int64, h uint64) {
	i := x.slotOf(id, h)
	for j := (i + 1) & x.mask; x.slots[j].row != 0; j = (j + 1) & x.mask {
		home := mix(uint64(x.slots[j].key)) & x.mask
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
