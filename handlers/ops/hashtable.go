package ops

import (
	"bytes"
	"sync"

	"golang.org/x/sys/cpu"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/internal/shardpipe"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// tableShards is the number of shards of a MutableHashTable, each with a
// lock of its own, so that steps looking up and inserting keys of
// different shards do not wait for each other (TensorFlow's table has one
// lock for all). 16, as an embedding table's: with more, a batch's keys
// are in too many small groups for the passes over each to keep many
// misses in flight (BenchmarkHashTable; BENCHMARKS.md).
const tableShards = 1 << tableShardBits

const tableShardBits = 4

// A hashTable is TensorFlow's MutableHashTable: every key maps to a value
// of valueShape (MutableHashTableV2: scalars; OfTensorsV2: vectors).
//
// Keys are spread over shards by a hash; each shard keeps its values in
// one slab, row r holding the value of keys[r], so that a table of
// millions of rows is a few large allocations rather than one per key,
// and a lookup copies rows out of the slab without allocating. Removing a
// key moves the shard's last row into its place.
//
// A call takes the lock of each shard its keys fall in once, in shard
// order, one at a time: a batch is not atomic against another step's
// batch (in TensorFlow it is), but every key is, and export and import
// take every shard's lock at once so that they see or replace one
// consistent table.
type hashTable[K tableKey] struct {
	tableMeta
	keys     keyCodec[K]
	width    int // value elements per key
	rowBytes int // bytes of a value; 0 for string values
	shards   [tableShards]hashShard[K]
}

type hashShard[K tableKey] struct {
	mu    sync.RWMutex
	index keyIndex[K] // the row of each key
	keys  []K         // keys[r] is row r's key
	vals  []byte      // fixed-size values: row r is vals[r*rowBytes:][:rowBytes]
	strs  [][]byte    // string values: row r is strs[r*width:][:width]
	_     cpu.CacheLinePad
}

// newHashTable makes an empty table described by m.
func newHashTable(m tableMeta) (lookupTable, error) {
	if m.keyType == wire.DTString {
		return newHashTableOf(m, stringKeys, 0), nil
	}
	return newHashTableOf(m, intKeys(m.keyType), 0), nil
}

// newHashTableOf makes an empty table described by m whose shards have
// room for perShard keys each before they grow.
func newHashTableOf[K tableKey](m tableMeta, keys keyCodec[K], perShard int) *hashTable[K] {
	width, _ := tensor.NumElements(m.valueShape)
	t := &hashTable[K]{tableMeta: m, keys: keys, width: int(width), rowBytes: int(width) * m.valueType.Size()}
	for i := range t.shards {
		t.shards[i].index = keys.index(perShard)
	}
	return t
}

// shardOf returns the shard number of a key whose spread hash is h: its
// high bits (its low bits choose the key's slot in the shard's index).
func shardOf(h uint64) int { return int(h >> (64 - tableShardBits)) }

// A shardOrder is the positions of a call's keys grouped by shard, in
// their order within a shard, so that a call takes each shard's lock
// once rather than once per key: a lock is an atomic instruction, which
// also keeps the processor from overlapping one key's cache misses with
// the next's.
type shardOrder struct {
	pos    []int32
	hashes []uint64               // hashes[i] is key i's spread hash
	rows   []int32                // rows[i] is key i's row, -1 for none, once found
	start  [tableShards + 1]int32 // shard s's positions are pos[start[s]:start[s+1]]
	sink   byte                   // what the loads made ahead of their use read
}

var shardOrders = sync.Pool{New: func() any { return new(shardOrder) }}

// order groups the n keys s holds by shard; release the order once done.
func (t *hashTable[K]) order(s *keyScratch, n int) *shardOrder {
	o := shardOrders.Get().(*shardOrder)
	if cap(o.pos) < n {
		o.pos, o.hashes, o.rows = make([]int32, n), make([]uint64, n), make([]int32, n)
	}
	o.pos, o.hashes, o.rows = o.pos[:n], o.hashes[:n], o.rows[:n]
	var count [tableShards]int32
	for i := range n {
		h := t.keys.spread(t.keys.at(s, i))
		o.hashes[i] = h
		count[shardOf(h)]++
	}
	o.start[0] = 0
	for sh := range tableShards {
		o.start[sh+1] = o.start[sh] + count[sh]
	}
	next := count // reused as each shard's next free slot
	copy(next[:], o.start[:tableShards])
	for i := range n {
		sh := shardOf(o.hashes[i])
		o.pos[next[sh]] = int32(i)
		next[sh]++
	}
	return o
}

// keysOf returns the positions of shard sh's keys.
func (o *shardOrder) keysOf(sh int) []int32 { return o.pos[o.start[sh]:o.start[sh+1]] }

func (o *shardOrder) release() { shardOrders.Put(o) }

// findRows sets o.rows[i] to the row of each key i of pos in sh, -1 for
// a key sh lacks; the caller holds sh's lock. The rows of a batch of
// random keys are cache misses, one for the index slot and one for the
// value; found one key after another, each waits for the last. So it
// goes in passes: load every key's home slot (loadHomes), then find every
// row (the slots now cached) and load its value's first byte
// (findCached), so that the caller's pass over the values finds them
// cached: the loads of a pass do not depend on each other, and the
// processor overlaps their misses.
func (t *hashTable[K]) findRows(sh *hashShard[K], s *keyScratch, o *shardOrder, pos []int32) {
	t.loadHomes(sh, o, pos)
	t.findCached(sh, s, o, pos)
}

// loadHomes loads the home index slot of each key of pos in sh.
func (t *hashTable[K]) loadHomes(sh *hashShard[K], o *shardOrder, pos []int32) {
	var home int64
	for _, i := range pos {
		home += sh.index.home(o.hashes[i])
	}
	o.sink += byte(home)
}

// findCached is findRows's second pass, once loadHomes's loads are in
// flight or done: the finds, then, in a short loop of its own, a load of
// each found value's first byte.
func (t *hashTable[K]) findCached(sh *hashShard[K], s *keyScratch, o *shardOrder, pos []int32) {
	for _, i := range pos {
		r, ok := sh.index.find(t.keys.at(s, int(i)), o.hashes[i])
		if !ok {
			r = -1
		}
		o.rows[i] = r
	}
	if t.rowBytes == 0 {
		return
	}
	var sink byte
	for _, i := range pos {
		if r := o.rows[i]; r >= 0 {
			sink += sh.vals[int(r)*t.rowBytes]
		}
	}
	o.sink += sink
}

func (t *hashTable[K]) find(keys, defaults *wire.Tensor, outShape []int64) (wire.Tensor, error) {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(keys, s)
	if err != nil {
		return wire.Tensor{}, err
	}
	if t.rowBytes == 0 {
		return t.findStrings(s, n, defaults, outShape)
	}
	out, err := tensor.New(t.valueType, outShape)
	if err != nil {
		return out, err
	}
	perKey := len(defaults.Data) == len(out.Data) // one default per key
	o := t.order(s, n)
	defer o.release()
	// The passes of findRows and the copy, pipelined one shard apart
	// (shardpipe.Run), so that more misses are in flight than one shard's
	// keys of a batch make. Up to three read locks are held, taken in
	// shard order as lockAll takes them.
	shardpipe.Run(tableShards, func(si int) bool { return len(o.keysOf(si)) > 0 },
		func(si int) { t.shards[si].mu.RLock(); t.loadHomes(&t.shards[si], o, o.keysOf(si)) },
		func(si int) { t.findCached(&t.shards[si], s, o, o.keysOf(si)) },
		func(si int) {
			t.copyRows(&t.shards[si], o, o.keysOf(si), out.Data, defaults.Data, perKey)
			t.shards[si].mu.RUnlock()
		})
	return out, nil
}

// copyRows copies the value of each key of pos in sh, or its default,
// into out; rows were found by findCached.
func (t *hashTable[K]) copyRows(sh *hashShard[K], o *shardOrder, pos []int32, out, defaults []byte, perKey bool) {
	rb := t.rowBytes
	for _, i := range pos {
		dst := out[int(i)*rb : (int(i)+1)*rb]
		switch r := o.rows[i]; {
		case r >= 0:
			copy(dst, sh.vals[int(r)*rb:])
		case perKey:
			copy(dst, defaults[int(i)*rb:])
		default:
			copy(dst, defaults)
		}
	}
}

// findStrings is find for a table of string values. A shard's elements
// are never changed in place (an insert stores new ones), so they may be
// read after its lock is released.
func (t *hashTable[K]) findStrings(s *keyScratch, n int, defaults *wire.Tensor, outShape []int64) (wire.Tensor, error) {
	def, err := stringElems(defaults)
	if err != nil {
		return wire.Tensor{}, err
	}
	w := t.width
	perKey := len(def) == n*w
	elems := make([][]byte, n*w)
	for i := range n {
		k := t.keys.at(s, i)
		dst := elems[i*w : (i+1)*w]
		h := t.keys.spread(k)
		sh := &t.shards[shardOf(h)]
		sh.mu.RLock()
		r, ok := sh.index.find(k, h)
		if ok {
			copy(dst, sh.strs[int(r)*w:])
		}
		sh.mu.RUnlock()
		switch {
		case ok:
		case perKey:
			copy(dst, def[i*w:])
		default:
			copy(dst, def)
		}
	}
	return encodeStringTensor(outShape, elems)
}

// values returns the elements of a string values tensor, or nil for one
// of fixed-size elements.
func (t *hashTable[K]) values(values *wire.Tensor) ([][]byte, error) {
	if t.rowBytes != 0 {
		return nil, nil
	}
	return stringElems(values)
}

// insert sets each key's value; of keys given twice, the last value
// stays, as in TensorFlow.
func (t *hashTable[K]) insert(keys, values *wire.Tensor) error {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(keys, s)
	if err != nil {
		return err
	}
	strs, err := t.values(values)
	if err != nil {
		return err
	}
	o := t.order(s, n)
	defer o.release()
	for si := range t.shards {
		sh := &t.shards[si]
		keys := o.keysOf(si)
		if len(keys) == 0 {
			continue
		}
		sh.mu.Lock()
		t.findRows(sh, s, o, keys)
		for _, i := range keys {
			if r := o.rows[i]; r >= 0 && t.rowBytes != 0 {
				rb := t.rowBytes
				copy(sh.vals[int(r)*rb:(int(r)+1)*rb], values.Data[int(i)*rb:])
				continue
			}
			// A new key (perhaps added by an earlier position of this
			// batch), or string values.
			t.set(sh, t.keys.at(s, int(i)), o.hashes[i], values, strs, int(i))
		}
		sh.mu.Unlock()
	}
	return nil
}

// set writes row i of values (or of strs) as k's value in sh, whose lock
// the caller holds for writing; h is k's spread hash.
func (t *hashTable[K]) set(sh *hashShard[K], k K, h uint64, values *wire.Tensor, strs [][]byte, i int) {
	r, ok := sh.index.find(k, h)
	if !ok {
		r = int32(len(sh.keys))
		k = t.keys.own(k)
		sh.index.add(k, h, r)
		sh.keys = append(sh.keys, k)
		if t.rowBytes != 0 {
			sh.vals = append(sh.vals, make([]byte, t.rowBytes)...)
		} else {
			sh.strs = append(sh.strs, make([][]byte, t.width)...)
		}
	}
	if t.rowBytes != 0 {
		rb := t.rowBytes
		copy(sh.vals[int(r)*rb:(int(r)+1)*rb], values.Data[i*rb:])
		return
	}
	w := t.width
	for j := range w {
		sh.strs[int(r)*w+j] = bytes.Clone(strs[i*w+j])
	}
}

func (t *hashTable[K]) remove(keys *wire.Tensor) error {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(keys, s)
	if err != nil {
		return err
	}
	o := t.order(s, n)
	defer o.release()
	for si := range t.shards {
		sh := &t.shards[si]
		keys := o.keysOf(si)
		if len(keys) == 0 {
			continue
		}
		sh.mu.Lock()
		for _, i := range keys {
			t.delete(sh, t.keys.at(s, int(i)), o.hashes[i])
		}
		sh.mu.Unlock()
	}
	return nil
}

// delete removes k, of spread hash h, from sh, whose lock the caller
// holds for writing, moving the last row into k's.
func (t *hashTable[K]) delete(sh *hashShard[K], k K, h uint64) {
	r, ok := sh.index.find(k, h)
	if !ok {
		return
	}
	sh.index.remove(k, h)
	last := int32(len(sh.keys) - 1)
	if r != last {
		moved := sh.keys[last]
		sh.keys[r] = moved
		sh.index.move(moved, t.keys.spread(moved), r)
		if t.rowBytes != 0 {
			rb := t.rowBytes
			copy(sh.vals[int(r)*rb:(int(r)+1)*rb], sh.vals[int(last)*rb:])
		} else {
			copy(sh.strs[int(r)*t.width:(int(r)+1)*t.width], sh.strs[int(last)*t.width:])
		}
	}
	var zero K
	sh.keys[last] = zero
	sh.keys = sh.keys[:last]
	if t.rowBytes != 0 {
		sh.vals = sh.vals[:int(last)*t.rowBytes]
	} else {
		clear(sh.strs[int(last)*t.width:])
		sh.strs = sh.strs[:int(last)*t.width]
	}
}

func (t *hashTable[K]) size() int64 {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		n += len(sh.keys)
		sh.mu.RUnlock()
	}
	return int64(n)
}

// lockAll takes every shard's lock, for reading or writing, in shard
// order; unlockAll releases them.
func (t *hashTable[K]) lockAll(write bool) {
	for i := range t.shards {
		if write {
			t.shards[i].mu.Lock()
		} else {
			t.shards[i].mu.RLock()
		}
	}
}

func (t *hashTable[K]) unlockAll(write bool) {
	for i := range t.shards {
		if write {
			t.shards[i].mu.Unlock()
		} else {
			t.shards[i].mu.RUnlock()
		}
	}
}

// export returns keys [n] and values [n, valueShape...], shard by shard:
// TensorFlow's order is its map's, unspecified too.
func (t *hashTable[K]) export() (keys, values wire.Tensor, err error) {
	t.lockAll(false)
	defer t.unlockAll(false)
	n := 0
	for i := range t.shards {
		n += len(t.shards[i].keys)
	}
	all := make([]K, 0, n)
	for i := range t.shards {
		all = append(all, t.shards[i].keys...)
	}
	if keys, err = t.keys.encode(all, []int64{int64(n)}); err != nil {
		return keys, values, err
	}
	shape := append([]int64{int64(n)}, t.valueShape...)
	if t.rowBytes == 0 {
		elems := make([][]byte, 0, n*t.width)
		for i := range t.shards {
			elems = append(elems, t.shards[i].strs...)
		}
		values, err = encodeStringTensor(shape, elems)
	} else if values, err = tensor.New(t.valueType, shape); err == nil {
		off := 0
		for i := range t.shards {
			off += copy(values.Data[off:], t.shards[i].vals)
		}
	}
	if err != nil {
		keys.Buf.Release()
	}
	return keys, values, err
}

func (t *hashTable[K]) checkImport(keys, values *wire.Tensor) error {
	return checkKeysAndValues(&t.tableMeta, keys, values)
}

// importValues replaces the table's contents: the new shards are built
// beside the old ones, then swapped in under every lock.
func (t *hashTable[K]) importValues(keys, values *wire.Tensor) error {
	s := getKeyScratch()
	defer s.put()
	n, err := t.keys.read(keys, s)
	if err != nil {
		return err
	}
	strs, err := t.values(values)
	if err != nil {
		return err
	}
	fresh := newHashTableOf(t.tableMeta, t.keys, n/tableShards+n/(4*tableShards))
	for i := range n {
		k := t.keys.at(s, i)
		h := t.keys.spread(k)
		t.set(&fresh.shards[shardOf(h)], k, h, values, strs, i)
	}
	t.lockAll(true)
	defer t.unlockAll(true)
	for i := range t.shards {
		sh, f := &t.shards[i], &fresh.shards[i]
		sh.index, sh.keys, sh.vals, sh.strs = f.index, f.keys, f.vals, f.strs
	}
	return nil
}

// checkKeysAndValues is TensorFlow's check of an insert's or import's
// tensors: dtypes of the table's, keys ending with the key shape, and
// values of the keys' shape with each key's shape replaced by a value's.
func checkKeysAndValues(m *tableMeta, keys, values *wire.Tensor) error {
	if err := checkKeyTypes(m, keys, values); err != nil {
		return err
	}
	if err := checkKeyShape(m, keys); err != nil {
		return err
	}
	want := valuesShape(m, keys.Shape)
	if !sameShape(values.Shape, want) {
		return status.Errorf(wire.InvalidArgument, "table %s: expected shape %v for value, got %v", m.name, tfShape(want), tfShape(values.Shape))
	}
	return nil
}
