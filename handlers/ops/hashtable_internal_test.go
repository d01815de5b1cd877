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
	tb.Helper()
	t, err := newHashTable(tableMeta{name: "emb", kind: hashOfTensors, keyType: wire.DTInt64, valueType: wire.DTFloat, keyShape: []int64{}, valueShape: []int64{int64(width)}})
	if err != nil {
		tb.Fatal(err)
	}
	const batch = 4096
	for lo := 0; lo < rows; lo += batch {
		n := min(batch, rows-lo)
		keys, vals := int64Tensor(n), floatTensor(n, width)
		for i := range n {
			tensor.View[int64](keys.Data)[i] = int64(lo + i)
			for j := range width {
				tensor.View[float32](vals.Data)[i*width+j] = float32(lo + i)
			}
		}
		if err := t.insert(&keys, &vals); err != nil {
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
// random keys (a new batch each call) in a MutableHashTableOfTensors of 16 floats per key, from
// one goroutine and from all at once.
func BenchmarkHashTable(b *testing.B) {
	const width, batch = 16, 1024
	for _, rows := range []int{1 << 20} {
		tab := embTable(b, rows, width)
		// A different batch each call, so that rows come from memory as
		// a training job's do, not from a cache one batch fits in.
		const batches = 1024
		pool, vals := randomKeys(batches*batch, rows), floatTensor(batch, width)
		def := tensor.Owned(wire.DTFloat, []int64{width}, width*4)
		shape := []int64{batch, width}
		keys := wire.Tensor{DType: wire.DTInt64, Shape: []int64{batch}}
		call := 0
		next := func() {
			k := call % batches * batch * 8
			keys.Data = pool.Data[k : k+batch*8]
			call++
		}
		find := func() {
			next()
			out, err := tab.find(&keys, &def, shape)
			if err != nil {
				b.Fatal(err)
			}
			out.Buf.Release()
		}
		update := func() {
			next()
			if err := tab.insert(&keys, &vals); err != nil {
				b.Fatal(err)
			}
		}
		for _, op := range []struct {
			name string
			f    func()
		}{{"find", find}, {"update", update}} {
			b.Run(fmt.Sprintf("%s/rows=%d", op.name, rows), func(b *testing.B) {
				b.ReportAllocs()
				cpu := startThreadCPU()
				for b.Loop() {
					op.f()
				}
				cpu.report(b, batch)
			})
			b.Run(fmt.Sprintf("%s-parallel/rows=%d", op.name, rows), func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						op.f()
					}
				})
				b.ReportMetric(float64(b.N)*batch/b.Elapsed().Seconds(), "keys/s")
			})
		}
	}
}

// BenchmarkFixedGather is the baseline of BenchmarkHashTable: the same
// rows in one slab indexed by key, as a fixed-size table's gather reads
// them.
func BenchmarkFixedGather(b *testing.B) {
	const width, batch, rows = 16, 1024, 1 << 20
	slab := make([]float32, rows*width)
	for i := range slab {
		// Written, so that it is memory of its own: never-written pages
		// all map the kernel's one zero page, which is always cached.
		slab[i] = float32(i)
	}
	const batches = 1024
	pool := tensor.View[int64](randomKeys(batches*batch, rows).Data)
	out := make([]float32, batch*width)
	b.ReportAllocs()
	cpu := startThreadCPU()
	call := 0
	for b.Loop() {
		keys := pool[call%batches*batch:][:batch]
		call++
		for i, k := range keys {
			copy(out[i*width:(i+1)*width], slab[int(k)*width:])
		}
	}
	cpu.report(b, batch)
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
