package embedding

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/starwire/starwire/internal/idindex"
)

// shardBits is log2 of the number of shards of a table: 16, locks enough
// for the workers' calls of a ps's few cores, with a batch's ids in few
// enough groups that each of a gather's passes has many misses in flight
// (with 64, BenchmarkTable's gather took longer; see BENCHMARKS.md). At
// most bloomPartBits.
const shardBits = 4

const numShards = 1 << shardBits

// ErrMismatch is wrapped by the errors of calls whose arguments do not fit
// the table: lengths of ids and values, or a snapshot of another shape.
var ErrMismatch = errors.New("embedding: mismatch")

// Options describe a table. The zero value but Dim is a table whose rows
// start at zero, are made on first lookup, and keep no optimizer slot.
type Options struct {
	// Dim is the number of values of a row.
	Dim int
	// Slots are the optimizer slots each row keeps beside its value, Dim
	// values each, by their initial value: Adagrad keeps one, its
	// accumulator, starting at initial_accumulator_value.
	Slots []float32
	// Init makes the value of a new row.
	Init Initializer
	// FilterFreq is the number of lookups of an id before its row is made
	// (DeepRec's counter filter). Until then a lookup answers the
	// initializer's value for the id and an update of it is dropped. 0
	// and 1 make a row on the first lookup.
	FilterFreq int64
	// Bloom, when set, counts the lookups of ids without a row in a
	// counting Bloom filter rather than exactly, per id (see BloomFilter).
	Bloom *BloomFilter
}

// An Initializer makes the value of a new row: Constant everywhere; or,
// with UniformLimit set, values drawn uniformly from [-UniformLimit,
// UniformLimit) by a hash of Seed, the id and the element, so that a row
// starts the same whichever step, ps or restart makes it; or, with Rows
// set, row id mod n of those n rows of Dim values (DeepRec's default value
// matrix of default_value_dim rows).
type Initializer struct {
	Constant     float32
	UniformLimit float32
	Seed         uint64
	Rows         []float32
}

// fill writes the initial value of id's row into dst.
func (in *Initializer) fill(id int64, dst []float32) {
	if d := len(dst); len(in.Rows) >= d {
		n := uint64(len(in.Rows) / d)
		copy(dst, in.Rows[int(uint64(id)%n)*d:])
		return
	}
	if in.UniformLimit <= 0 {
		for i := range dst {
			dst[i] = in.Constant
		}
		return
	}
	base := mix(in.Seed ^ mix(uint64(id)))
	for i := range dst {
		u := float32(mix(base+uint64(i))>>40) / (1 << 24) // in [0, 1)
		dst[i] = (2*u - 1) * in.UniformLimit
	}
}

// mix is splitmix64's finalizer: a bijection of uint64 whose every output
// bit depends on every input bit.
// It is the hash the index expects.
func mix(x uint64) uint64 { return idindex.Hash(x) }

// A Table is an embedding variable: see the package doc. Safe for
// concurrent use.
type Table struct {
	opts   Options
	rest   int // floats of a row in its shard's rest slab: see shard
	shards [numShards]shard
	// observer hears of evictions and restores (observer.go).
	observer atomic.Pointer[Observer]
	// sink is what a restore's loads made ahead of their use read, into
	// the fresh table no other call sees yet (restoreRows).
	sink int64
}

// A shard holds the rows of the ids whose hash's top bits are its number.
// Row r is ids[r], its value vals[r*Dim:][:Dim], and rest[r*rest:][:rest]:
// the version of its last update (an int64, in the room of 2 floats),
// then each slot (and a float of padding when they are of an odd number,
// so that every row's version is 8-byte aligned). Its lookup count is in
// its id's index slot. So a lookup of a random id touches the index slot
// and the value alone (64 bytes of 16 floats, one cache line as a fixed
// table's row), and a gather's working set is the values rather than
// every row's value, slots, count and version. The index maps an id to
// its row. Everything is guarded by mu.
type shard struct {
	mu      sync.Mutex
	idx     index
	ids     []int64
	vals    []float32
	rest    []float32
	pending map[int64]int64 // lookups of ids not yet admitted, without Bloom
	bloom   *bloom          // with Bloom
	_       cpu.CacheLinePad
}

// New returns an empty table.
func New(opts Options) (*Table, error) {
	if opts.Dim <= 0 {
		return nil, fmt.Errorf("embedding: dimension %d: %w", opts.Dim, ErrMismatch)
	}
	if b := opts.Bloom; b != nil && (b.Counters <= 0 || b.Hashes <= 0) {
		return nil, fmt.Errorf("embedding: a Bloom filter of %d counters and %d hashes: %w", b.Counters, b.Hashes, ErrMismatch)
	}
	opts.Slots = append([]float32(nil), opts.Slots...)
	opts.Init.Rows = append([]float32(nil), opts.Init.Rows...)
	if len(opts.Init.Rows)%opts.Dim != 0 {
		return nil, fmt.Errorf("embedding: initial rows of %d floats for rows of %d: %w", len(opts.Init.Rows), opts.Dim, ErrMismatch)
	}
	slots := opts.Dim * len(opts.Slots)
	t := &Table{opts: opts, rest: versionFloats + slots + slots%2}
	for i := range t.shards {
		t.shards[i].idx.init(8)
		t.shards[i].pending = map[int64]int64{}
		if opts.Bloom != nil {
			t.shards[i].bloom = opts.Bloom.shard()
		}
	}
	return t, nil
}

// Dim is the number of values of a row.
func (t *Table) Dim() int { return t.opts.Dim }

// Slots returns the number of optimizer slots of a row.
func (t *Table) Slots() int { return len(t.opts.Slots) }

// ErrNotEmpty is returned by SetSlotInit on a table that has rows.
var ErrNotEmpty = errors.New("embedding: the table has rows")

// SetSlotInit sets the initial value of slot k of rows yet to be made,
// which may be set only while the table has none: DeepRec initializes an
// optimizer's slots after the variable they belong to.
func (t *Table) SetSlotInit(k int, v float32) error {
	if k < 0 || k >= len(t.opts.Slots) {
		return fmt.Errorf("embedding: slot %d of a table of %d: %w", k, len(t.opts.Slots), ErrMismatch)
	}
	for i := range t.shards {
		t.shards[i].mu.Lock()
		defer t.shards[i].mu.Unlock()
	}
	for i := range t.shards {
		if len(t.shards[i].ids) > 0 {
			return fmt.Errorf("embedding: set slot %d's initial value: %w", k, ErrNotEmpty)
		}
	}
	t.opts.Slots[k] = v
	return nil
}

// Len returns the number of rows.
func (t *Table) Len() int {
	n := 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		n += len(sh.ids)
		sh.mu.Unlock()
	}
	return n
}

// BytesPerRow returns the memory the table holds per row: the slabs,
// index (which holds the rows' lookup counts) and Bloom filter it
// allocated, divided by its rows (0 when it has none). The exact counts of
// ids not yet admitted are left out.
func (t *Table) BytesPerRow() float64 {
	bytes, rows := 0, 0
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		rows += len(sh.ids)
		bytes += 8*cap(sh.ids) + 4*(cap(sh.vals)+cap(sh.rest)) + idindex.SlotBytes*sh.idx.Slots()
		if sh.bloom != nil {
			bytes += len(sh.bloom.counts)
		}
		sh.mu.Unlock()
	}
	if rows == 0 {
		return 0
	}
	return float64(bytes) / float64(rows)
}

// shardOf returns the shard of an id's hash h.
func shardOf(h uint64) int { return int(h >> (64 - shardBits)) }

// versionFloats is the floats of a row's room for its version.
const versionFloats = 2

// val returns row r's value in sh.
func (t *Table) val(sh *shard, r int32) []float32 {
	d := t.opts.Dim
	lo := int(r) * d
	return sh.vals[lo : lo+d : lo+d]
}

// slot returns row r's slot k in sh.
func (t *Table) slot(sh *shard, r int32, k int) []float32 {
	d := t.opts.Dim
	lo := int(r)*t.rest + versionFloats + k*d
	return sh.rest[lo : lo+d : lo+d]
}

// version returns the global step of row r's last update in sh.
func (t *Table) version(sh *shard, r int32) *int64 {
	return (*int64)(unsafe.Pointer(&sh.rest[int(r)*t.rest]))
}

// count returns a lookup count of the API's int64 as the index keeps it:
// saturated at math.MaxUint32, and at 0 below it.
func count(n int64) uint32 { return uint32(min(max(n, 0), math.MaxUint32)) }

// add appends a row for id, made by the initializer, with its slots at
// their initial values and a lookup count of freq (see count), and returns
// it; the caller holds sh.mu.
func (t *Table) add(sh *shard, id int64, h uint64, freq int64) int32 {
	r := int32(len(sh.ids))
	sh.ids = append(sh.ids, id)
	sh.vals = append(sh.vals, make([]float32, t.opts.Dim)...)
	sh.rest = append(sh.rest, make([]float32, t.rest)...)
	t.opts.Init.fill(id, t.val(sh, r))
	for k, v := range t.opts.Slots {
		slot := t.slot(sh, r, k)
		for i := range slot {
			slot[i] = v
		}
	}
	sh.idx.insertCount(id, h, r, count(freq))
	return r
}

// drop removes row r of sh, moving the last row into its place; the
// caller holds sh.mu.
func (t *Table) drop(sh *shard, r int32) {
	id := sh.ids[r]
	sh.idx.remove(id, mix(uint64(id)))
	last := int32(len(sh.ids) - 1)
	d, w := t.opts.Dim, t.rest
	if r != last {
		moved := sh.ids[last]
		sh.ids[r] = moved
		copy(sh.vals[int(r)*d:(int(r)+1)*d], sh.vals[int(last)*d:])
		copy(sh.rest[int(r)*w:(int(r)+1)*w], sh.rest[int(last)*w:])
		sh.idx.setRow(moved, mix(uint64(moved)), r)
	}
	sh.ids = sh.ids[:last]
	sh.vals = sh.vals[:int(last)*d]
	sh.rest = sh.rest[:int(last)*w]
}

// l2 returns the L2 norm of v.
func l2(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}
