package ops

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// embTable returns a MutableHashTableOfTensors of int64 keys to float
// vectors of width holding rows keys 0..rows-1, key k's row all k.
func embTable(tb testing.TB, rows, width int) lookupTable {
	return embTableWith(tb, rows, width, intKeys(wire.DTInt64))
}

// embTableWith is embTable with the key codec keys, whose index the
// table's shards use.
func embTableWith(tb testing.TB, rows, width int, keys keyCodec[int64]) *hashTable[int64] {
	tb.Helper()
	t := newHashTableOf(tableMeta{name: "emb", kind: hashOfTensors, keyType: wire.DTInt64, valueType: wire.DTFloat, keyShape: []int64{}, valueShape: []int64{int64(width)}}, keys, 0)
	const batch = 4096
	ks, vals := int64Tensor(batch), floatTensor(batch, width)
	for lo := 0; lo < rows; lo += batch {
		n := min(batch, rows-lo)
		ks.Data, ks.Shape = ks.Data[:n*8], []int64{int64(n)}
		vals.Data, vals.Shape = vals.Data[:n*width*4], []int64{int64(n), int64(width)}
		for i := range n {
			tensor.View[int64](ks.Data)[i] = int64(lo + i)
			for j := range width {
				tensor.View[float32](vals.Data)[i*width+j] = float32(lo + i)
			}
		}
		if err := t.insert(&ks, &vals); err != nil {
			tb.Fatal(err)
		}
	}
	return t
}

func int64Tensor(n int) wire.Tensor {
	return tensor.Owned(wire.DTInt64, []int64{int64(n)}, n*8)
}

func floatTensor(n, width int) wire.Tensor {
	return tensor.Owned(wire.DTFloat, []int64{int64(n), int64(width)}, n*width*4)
}

// randomKeys returns n keys below rows, drawn from a fixed seed.
func randomKeys(n, rows int) wire.Tensor {
	keys := int64Tensor(n)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range tensor.View[int64](keys.Data) {
		tensor.View[int64](keys.Data)[i] = r.Int64N(int64(rows))
	}
	return keys
}

// TestTableHotPathAllocations checks that looking up and updating keys
// costs no allocation per key: a batch of 1000 keys allocates what a
// batch of 10 does, at most the output tensor's shape.
func TestTableHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	const rows, width = 10000, 16
	tables := map[string]lookupTable{"hash": embTable(t, rows, width)}
	dense, err := newDenseTable(tableMeta{name: "dense", kind: denseHash, keyType: wire.DTInt64, valueType: wire.DTFloat, valueShape: []int64{width}},
		scalarInt64(-1), scalarInt64(-2), 1<<15, 0.8)
	if err != nil {
		t.Fatal(err)
	}
	keys, vals := randomKeys(rows, rows), floatTensor(rows, width)
	if err := dense.insert(&keys, &vals); err != nil {
		t.Fatal(err)
	}
	tables["dense"] = dense
	def := tensor.Owned(wire.DTFloat, []int64{width}, width*4)
	for name, tab := range tables {
		allocs := map[int][2]float64{}
		for _, n := range []int{10, 1000} {
			keys, vals := randomKeys(n, rows), floatTensor(n, width)
			shape := []int64{int64(n), width}
			find := testing.AllocsPerRun(50, func() {
				out, err := tab.find(&keys, &def, shape)
				if err != nil {
					t.Fatal(err)
				}
				out.Buf.Release()
			})
			update := testing.AllocsPerRun(50, func() {
				if err := tab.insert(&keys, &vals); err != nil {
					t.Fatal(err)
				}
			})
			allocs[n] = [2]float64{find, update}
		}
		t.Logf("%s table: allocations per find and update of 10 keys %v, of 1000 keys %v", name, allocs[10], allocs[1000])
		if allocs[10] != allocs[1000] || allocs[1000][0] > 1 || allocs[1000][1] > 0 {
			t.Errorf("%s table: allocations per find and update of 10 keys %v, of 1000 keys %v; want the same, at most [1 0]", name, allocs[10], allocs[1000])
		}
	}
}

func scalarInt64(v int64) *wire.Tensor {
	t := tensor.Owned(wire.DTInt64, []int64{}, 8)
	tensor.View[int64](t.Data)[0] = v
	return &t
}

// BenchmarkHashTable measures lookups and updates of batches of 1024
// random keys (a new batch each call) in a MutableHashTableOfTensors of
// 16 floats per key, of 1M and of 10M keys, against the same work on a
// fixed table (the rows in one slab indexed by key, as a fixed-size
// variable's gather reads them) and on the table's shards indexed by a Go
// map (its layout before open addressing), in the same run. It reports
// keys per second, CPU nanoseconds per key (the goroutine's own thread
// time: the machine is shared) and the heap the table holds per key.
func BenchmarkHashTable(b *testing.B) {
	const width, batch = 16, 1024
	for _, rows := range []int{1 << 20, 10 << 20} {
		b.Run(fmt.Sprintf("rows=%dM", rows>>20), func(b *testing.B) {
			// A different batch each call, so that rows come from memory
			// as a training job's do, not from a cache one batch fits in.
			const batches = 1024
			pool := randomKeys(batches*batch, rows)
			keys := wire.Tensor{DType: wire.DTInt64, Shape: []int64{batch}}
			call := 0
			next := func() *wire.Tensor {
				k := call % batches * batch * 8
				keys.Data = pool.Data[k : k+batch*8]
				call++
				return &keys
			}
			for _, kind := range []string{"fixed", "open", "map"} {
				b.Run(kind, func(b *testing.B) { benchHashTableKind(b, kind, rows, width, batch, next) })
			}
		})
	}
}

// benchHashTableKind runs BenchmarkHashTable's find and update of a
// table of kind (fixed, open or map) of rows keys, each call of a batch
// of keys from next.
func benchHashTableKind(b *testing.B, kind string, rows, width, batch int, next func() *wire.Tensor) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	find, update := hashBenchOps(b, kind, rows, width, batch, next)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRow := float64(after.HeapAlloc-before.HeapAlloc) / float64(rows)
	for _, op := range []struct {
		name string
		f    func()
	}{{"find", find}, {"update", update}} {
		b.Run(op.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startThreadCPU()
			for b.Loop() {
				op.f()
			}
			cpu.report(b, batch)
			b.ReportMetric(perRow, "B/row")
		})
	}
	if kind == "open" {
		b.Run("find-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					find()
				}
			})
			b.ReportMetric(float64(b.N)*float64(batch)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// hashBenchOps returns BenchmarkHashTable's find and update of a table of
// kind (fixed, open or map) of rows keys; each takes its batch of keys
// from next.
func hashBenchOps(b *testing.B, kind string, rows, width, batch int, next func() *wire.Tensor) (find, update func()) {
	vals := floatTensor(batch, width)
	if kind == "fixed" {
		slab := make([]float32, rows*width)
		for i := range slab {
			// Written, so that it is memory of its own: never-written
			// pages all map the kernel's one zero page, always cached.
			slab[i] = float32(i)
		}
		out, in := make([]float32, batch*width), tensor.View[float32](vals.Data)
		find = func() {
			for i, k := range tensor.View[int64](next().Data) {
				copy(out[i*width:(i+1)*width], slab[int(k)*width:])
			}
		}
		update = func() {
			for i, k := range tensor.View[int64](next().Data) {
				copy(slab[int(k)*width:(int(k)+1)*width], in[i*width:])
			}
		}
		return find, update
	}
	codec := intKeys(wire.DTInt64)
	if kind == "map" {
		codec.index = newMapIndex[int64]
	}
	tab := embTableWith(b, rows, width, codec)
	def := tensor.Owned(wire.DTFloat, []int64{int64(width)}, width*4)
	shape := []int64{int64(batch), int64(width)}
	find = func() {
		out, err := tab.find(next(), &def, shape)
		if err != nil {
			b.Fatal(err)
		}
		out.Buf.Release()
	}
	update = func() {
		if err := tab.insert(next(), &vals); err != nil {
			b.Fatal(err)
		}
	}
	return find, update
}

// A threadCPU measures the CPU time of a benchmark's goroutine, locked
// to its thread: on a machine others load, the time a benchmark waited
// for a CPU is not the cost of what it measures.
type threadCPU struct{ start time.Duration }

func startThreadCPU() threadCPU {
	runtime.LockOSThread()
	return threadCPU{start: threadTime()}
}

func threadTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report reports keys per second of wall time and CPU nanoseconds per
// key, for b.N calls of keys keys each.
func (c threadCPU) report(b *testing.B, keys int) {
	cpu := threadTime() - c.start
	runtime.UnlockOSThread()
	n := float64(b.N) * float64(keys)
	b.ReportMetric(n/b.Elapsed().Seconds(), "keys/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/key")
}
