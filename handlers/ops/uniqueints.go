package ops

import (
	"math/bits"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// uniqueScratch is the open-addressing table of one Unique of integers:
// slot holds 1 + the position in firsts of the id hashed there (0: empty),
// firsts the index in x of each distinct id's first occurrence. Kept in a
// pool so that a step's Unique allocates only its outputs.
type uniqueScratch struct {
	slots  []int32
	firsts []int32
}

var uniqueScratchPool = sync.Pool{New: func() any { return new(uniqueScratch) }}

// uniqueInts is unique for integer ids, the embedding lookup's case: a
// linear-probing table sized to twice the ids, instead of a map built and
// dropped every step. Results are unique's: ids in order of first
// appearance, idx[i] the position of x[i] among them.
func uniqueInts[T int32 | int64](dt wire.DataType, x []T, idx *wire.Tensor) (wire.Tensor, error) {
	if len(x) >= 1<<30 {
		return unique(dt, x, idx)
	}
	s := uniqueScratchPool.Get().(*uniqueScratch)
	defer uniqueScratchPool.Put(s)
	shift := 64 - bits.Len(uint(2*len(x)))
	size := 1 << (64 - shift)
	if cap(s.slots) < size {
		s.slots = make([]int32, size)
	} else {
		s.slots = s.slots[:size]
		clear(s.slots)
	}
	s.firsts = s.firsts[:0]
	mask := uint64(size - 1)
	idx64 := idx.DType == wire.DTInt64
	var out64 []int64
	var out32 []int32
	if idx64 {
		out64 = tensor.View[int64](idx.Data)
	} else {
		out32 = tensor.View[int32](idx.Data)
	}
	for i, v := range x {
		h := (uint64(v) * 0x9e3779b97f4a7c15) >> shift
		var p int32
		for {
			e := s.slots[h]
			if e == 0 {
				p = int32(len(s.firsts))
				s.firsts = append(s.firsts, int32(i))
				s.slots[h] = p + 1
				break
			}
			if x[s.firsts[e-1]] == v {
				p = e - 1
				break
			}
			h = (h + 1) & mask
		}
		if idx64 {
			out64[i] = int64(p)
		} else {
			out32[i] = p
		}
	}
	y, err := tensor.New(dt, []int64{int64(len(s.firsts))})
	if err != nil {
		return wire.Tensor{}, err
	}
	dst := tensor.View[T](y.Data)
	for k, i := range s.firsts {
		dst[k] = x[i]
	}
	return y, nil
}
