package ops

import "sync"

// A stripeOrder is the positions of a kernel's row indices grouped by the
// row stripe each index falls in, in their order within a stripe, so that
// a sparse kernel takes each stripe lock once per run instead of once per
// row: the lock and unlock of every row were a large part of a sparse
// update of many narrow rows (Adagrad of an embedding step took two of
// each per row). Rows of one stripe, duplicates among them, are still
// worked in the order the indices give.
type stripeOrder struct {
	pos   []int32
	start [rowStripes + 1]int32 // stripe s's positions are pos[start[s]:start[s+1]]
}

var stripeOrders = sync.Pool{New: func() any { return new(stripeOrder) }}

// orderByStripe returns idx's positions by stripe; release it once done.
// The indices must be checked (non-negative).
func orderByStripe(idx []int64) *stripeOrder {
	o := stripeOrders.Get().(*stripeOrder)
	if cap(o.pos) < len(idx) {
		o.pos = make([]int32, len(idx))
	}
	o.pos = o.pos[:len(idx)]
	var count [rowStripes]int32
	for _, x := range idx {
		count[uint64(x)%rowStripes]++
	}
	o.start[0] = 0
	for s := range rowStripes {
		o.start[s+1] = o.start[s] + count[s]
	}
	next := count // reused as each stripe's next free slot
	copy(next[:], o.start[:rowStripes])
	for i, x := range idx {
		s := uint64(x) % rowStripes
		o.pos[next[s]] = int32(i)
		next[s]++
	}
	return o
}

// stripe returns the positions of stripe s.
func (o *stripeOrder) stripe(s int) []int32 { return o.pos[o.start[s]:o.start[s+1]] }

func (o *stripeOrder) release() { stripeOrders.Put(o) }
