package embedding

// An index maps a shard's ids to their rows: open addressing with linear
// probing over a power-of-two number of slots, kept at most 3/4 full,
// with deletion by backward shift (no tombstones, so a lookup's probe
// never grows with the removes before it). A slot holds an id and its
// row plus one; 0 marks it empty. An id's home slot is the low bits of
// its hash (the shard is chosen by the high bits).
type index struct {
	keys []int64
	rows []int32
	mask uint64
	n    int
}

func (x *index) init(slots int) {
	x.keys, x.rows, x.mask, x.n = make([]int64, slots), make([]int32, slots), uint64(slots-1), 0
}

// find returns id's row.
func (x *index) find(id int64, h uint64) (int32, bool) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		switch r := x.rows[i]; {
		case r == 0:
			return 0, false
		case x.keys[i] == id:
			return r - 1, true
		}
	}
}

// insert adds id, which is not in x, at row r.
func (x *index) insert(id int64, h uint64, r int32) {
	if 4*(x.n+1) > 3*len(x.keys) {
		x.grow()
	}
	i := h & x.mask
	for x.rows[i] != 0 {
		i = (i + 1) & x.mask
	}
	x.keys[i], x.rows[i] = id, r+1
	x.n++
}

// grow doubles the slots.
func (x *index) grow() {
	keys, rows := x.keys, x.rows
	x.init(2 * len(keys))
	for i, r := range rows {
		if r != 0 {
			x.insert(keys[i], mix(uint64(keys[i])), r-1)
		}
	}
}

// slot returns the slot holding id, which is in x.
func (x *index) slot(id int64, h uint64) uint64 {
	i := h & x.mask
	for x.keys[i] != id || x.rows[i] == 0 {
		i = (i + 1) & x.mask
	}
	return i
}

// setRow records that id, which is in x, is now at row r.
func (x *index) setRow(id int64, h uint64, r int32) { x.rows[x.slot(id, h)] = r + 1 }

// remove deletes id, which is in x, shifting back the ids after it whose
// probe passed its slot.
func (x *index) remove(id int64, h uint64) {
	i := x.slot(id, h)
	for j := (i + 1) & x.mask; x.rows[j] != 0; j = (j + 1) & x.mask {
		home := mix(uint64(x.keys[j])) & x.mask
		// The id at j may move to the hole at i if its home is not in
		// the cyclic range (i, j].
		if (j-home)&x.mask >= (j-i)&x.mask {
			x.keys[i], x.rows[i] = x.keys[j], x.rows[j]
			i = j
		}
	}
	x.keys[i], x.rows[i] = 0, 0
	x.n--
}
