package embedding

import (
	"fmt"
	"math"
	"sync"

	"github.com/starwire/starwire/internal/shardpipe"
)

// A shardOrder is the positions of a call's ids grouped by shard, in
// their order within a shard, so that a call takes each shard's lock once
// and works the ids of one shard in the order given (duplicates too).
type shardOrder struct {
	pos    []int32
	hashes []uint64
	rows   []int32 // rows[i] is id i's row, -1 for none, once found
	start  [numShards + 1]int32
	sink   float32 // what the loads made ahead of their use read
}

var orders = sync.Pool{New: func() any { return new(shardOrder) }}

func orderIDs(ids []int64) *shardOrder {
	o := orders.Get().(*shardOrder)
	if cap(o.pos) < len(ids) {
		o.pos, o.hashes, o.rows = make([]int32, len(ids)), make([]uint64, len(ids)), make([]int32, len(ids))
	}
	o.pos, o.hashes, o.rows = o.pos[:len(ids)], o.hashes[:len(ids)], o.rows[:len(ids)]
	var count [numShards]int32
	for i, id := range ids {
		h := mix(uint64(id))
		o.hashes[i] = h
		count[shardOf(h)]++
	}
	o.start[0] = 0
	for s := range numShards {
		o.start[s+1] = o.start[s] + count[s]
	}
	next := count
	copy(next[:], o.start[:numShards])
	for i := range ids {
		s := shardOf(o.hashes[i])
		o.pos[next[s]] = int32(i)
		next[s]++
	}
	return o
}

func (o *shardOrder) of(s int) []int32 { return o.pos[o.start[s]:o.start[s+1]] }

func (o *shardOrder) release() { orders.Put(o) }

// pipeline runs the three passes of a batched call over the ids of o,
// shard by shard, each shard's one step ahead of the next pass of the
// shard before (shardpipe.Run): the misses of one shard's index slots are
// in flight with those of the previous shard's rows (BenchmarkTable; the
// figures are in BENCHMARKS.md). Each pass gets a shard and the positions
// of its ids in the call; the shard's lock is held from its first pass to
// its third, so up to three are held at once, taken in ascending order of
// shards as every call taking more than one lock takes them.
func (t *Table) pipeline(o *shardOrder, load, find, use func(sh *shard, pos []int32)) {
	shardpipe.Run(numShards, func(s int) bool { return len(o.of(s)) > 0 },
		func(s int) { t.shards[s].mu.Lock(); load(&t.shards[s], o.of(s)) },
		func(s int) { find(&t.shards[s], o.of(s)) },
		func(s int) { use(&t.shards[s], o.of(s)); t.shards[s].mu.Unlock() })
}

// loadHomes loads the home index slot of each id at pos, the first pass
// of a pipeline: the loads do not depend on each other, and the processor
// overlaps their misses.
func (o *shardOrder) loadHomes(sh *shard, pos []int32) {
	var k int64
	for _, i := range pos {
		k += sh.idx.home(o.hashes[i])
	}
	o.sink += float32(k & 1)
}

// loadValues loads the first float of the value of each row at pos, in
// a pass of its own after the finds: a short loop without a branch on
// what it loads (an id without a row, -1, loads row 0), so that many of
// its misses fit in the processor's window.
func (o *shardOrder) loadValues(sh *shard, pos []int32, d int) {
	vals := sh.vals
	if len(vals) == 0 {
		return
	}
	var sink float32
	for _, i := range pos {
		sink += vals[int(max(o.rows[i], 0))*d]
	}
	o.sink += sink
}

// each finds the rows of ids and runs f for every id, under its shard's
// lock, shard by shard; f gets the id's row, or -1 when it has none. With
// rest, f uses the rows' versions or slots as well as their values. It
// neither counts lookups nor makes rows.
//
// The rows of a batch of random ids are cache misses, one for the index
// slot and one for the row; worked one id after another, each waits for
// the last. So each goes in the three passes of a pipeline over a
// shard's ids: load every id's home slot, then find every row (the slots
// now cached) and load its value's first float (and with rest its
// rest's), then run f (the rows cached): the loads of a pass do not
// depend on each other, and the processor overlaps their misses.
func (t *Table) each(ids []int64, rest bool, f func(sh *shard, i int, r int32)) {
	o := orderIDs(ids)
	defer o.release()
	d := t.opts.Dim
	t.pipeline(o, o.loadHomes, func(sh *shard, pos []int32) {
		for _, i := range pos {
			r, ok := sh.idx.find(ids[i], o.hashes[i])
			if !ok {
				r = -1
			}
			o.rows[i] = r
		}
		o.loadValues(sh, pos, d)
		if rest {
			o.loadRest(sh, pos, t.rest)
		}
	}, func(sh *shard, pos []int32) {
		for _, i := range pos {
			f(sh, int(i), o.rows[i])
		}
	})
}

// loadRest is loadValues for the rows' rest, of n floats each: every
// cache line of it, as a row's rest is not aligned to lines (a version
// and one slot of 16 floats, 72 bytes, always span two) and an update
// reads and writes all of it.
func (o *shardOrder) loadRest(sh *shard, pos []int32, n int) {
	const line = 64 / 4 // floats of a cache line
	rest := sh.rest
	if len(rest) == 0 {
		return
	}
	var sink float32
	for _, i := range pos {
		lo := int(max(o.rows[i], 0)) * n
		for j := 0; j < n; j += line {
			sink += rest[lo+j]
		}
		sink += rest[lo+n-1]
	}
	o.sink += sink
}

// Gather writes the value of each id's row into out, len(ids)*Dim
// floats, counting the lookup. An id without a row gets one if this
// lookup admits it; until then it reads the initializer's value.
//
// It goes in each's passes: load the home slots; find the rows, counting
// each lookup in its index slot (the pass that has the slot cached, so
// the count dirties no line of the rows) and admitting the ids without
// one, then load each value; copy the values.
func (t *Table) Gather(ids []int64, out []float32) error {
	d := t.opts.Dim
	if len(out) != len(ids)*d {
		return fmt.Errorf("embedding: gather of %d ids into %d floats of rows of %d: %w", len(ids), len(out), d, ErrMismatch)
	}
	o := orderIDs(ids)
	defer o.release()
	t.pipeline(o, o.loadHomes, func(sh *shard, pos []int32) {
		for _, i := range pos {
			r, ok := sh.idx.findCount(ids[i], o.hashes[i])
			if !ok {
				if r, ok = t.admit(sh, ids[i], o.hashes[i]); !ok {
					r = -1
				}
			}
			o.rows[i] = r
		}
		o.loadValues(sh, pos, d)
	}, func(sh *shard, pos []int32) {
		vals := sh.vals
		for _, i := range pos {
			dst := out[int(i)*d : int(i)*d+d]
			if r := o.rows[i]; r >= 0 {
				copy(dst, vals[int(r)*d:int(r)*d+d])
				continue
			}
			t.opts.Init.fill(ids[i], dst)
		}
	})
	return nil
}

// admit counts a lookup of id, which has no row, and makes its row once
// its lookups reach FilterFreq; the caller holds sh.mu.
func (t *Table) admit(sh *shard, id int64, h uint64) (int32, bool) {
	if t.opts.FilterFreq <= 1 {
		return t.add(sh, id, h, 1), true
	}
	if sh.bloom != nil {
		if n := sh.bloom.add(h); n >= t.opts.FilterFreq {
			return t.add(sh, id, h, n), true
		}
		return 0, false
	}
	n := sh.pending[id] + 1
	if n < t.opts.FilterFreq {
		sh.pending[id] = n
		return 0, false
	}
	delete(sh.pending, id)
	return t.add(sh, id, h, n), true
}

// ApplyAdagrad updates the rows of ids with their gradients grads,
// len(ids)*Dim floats, as TensorFlow's SparseApplyAdagrad does: for each
// id in order, accum += g*g, then value -= lr * g / sqrt(accum), slot 0
// being the accumulator; the row's version becomes step. Gradients of ids
// without a row (not admitted) are dropped. It returns the number of
// gradients applied.
func (t *Table) ApplyAdagrad(ids []int64, grads []float32, lr float32, step int64) (int, error) {
	return t.ApplyAdagradSlot(0, ids, grads, lr, step)
}

// ApplyAdagradSlot is ApplyAdagrad with slot k as the accumulator.
func (t *Table) ApplyAdagradSlot(k int, ids []int64, grads []float32, lr float32, step int64) (int, error) {
	d := t.opts.Dim
	if len(grads) != len(ids)*d {
		return 0, fmt.Errorf("embedding: %d gradient floats for %d ids of %d: %w", len(grads), len(ids), d, ErrMismatch)
	}
	if k < 0 || k >= len(t.opts.Slots) {
		return 0, fmt.Errorf("embedding: Adagrad's accumulator is slot %d, the table has %d: %w", k, len(t.opts.Slots), ErrMismatch)
	}
	applied := 0
	t.each(ids, true, func(sh *shard, i int, r int32) {
		if r < 0 {
			return
		}
		g := grads[i*d : (i+1)*d]
		v, acc := t.val(sh, r), t.slot(sh, r, k)
		for j, gj := range g {
			acc[j] += gj * gj
			v[j] -= lr * gj / float32(math.Sqrt(float64(acc[j])))
		}
		*t.version(sh, r) = step
		applied++
	})
	return applied, nil
}

// Evict removes the rows not updated for more than stepsToLive steps
// before step (when stepsToLive > 0) and the rows whose value's L2 norm
// is below minL2 (when minL2 > 0), DeepRec's eviction at save time, and
// returns how many it removed.
func (t *Table) Evict(step, stepsToLive int64, minL2 float64) int {
	n := 0
	for s := range t.shards {
		sh := &t.shards[s]
		sh.mu.Lock()
		o := t.observing()
		var gone []int64 // for o
		for r := int32(0); r < int32(len(sh.ids)); {
			stale := stepsToLive > 0 && step-*t.version(sh, r) > stepsToLive
			small := minL2 > 0 && l2(t.val(sh, r)) < minL2
			if stale || small {
				if o != nil {
					gone = append(gone, sh.ids[r])
				}
				t.drop(sh, r) // the last row moves to r: look at r again
				n++
				continue
			}
			r++
		}
		if len(gone) > 0 {
			o.Evicted(gone)
		}
		sh.mu.Unlock()
	}
	return n
}
