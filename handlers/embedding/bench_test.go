package embedding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// BenchmarkTable measures Gather and ApplyAdagrad of batches of 1024
// random ids (a new batch each call) of a table of 1M and of 10M rows of
// 16 floats with an Adagrad slot, against the same work on a fixed table
// (rows in one slab indexed by id, as a dense variable's gather and
// sparse Adagrad do it), in the same run. It reports keys per second, CPU
// nanoseconds per key (the goroutine's own thread time: the machine is
// shared) and the table's bytes per row.
//
// Two more gathers take the fixed table towards a table of rows as
// records one step at a time, to tell where such a table's time goes:
// gather-fixed-rows reads rows laid out as records (count and version
// beside the value and its slot, 144 bytes a row, the table's layout
// before its values had a slab of their own) indexed by id, counting the
// lookup;
// gather-fixed-rows-index takes each id's row from a slot of an array as
// large as the table's index, at the slot its hash names, in a pass of
// its own over the batch before the rows' (as the table does over a
// shard's ids): the table's loads, and their dependence, without its
// probe, shards, locks or admission.
func BenchmarkTable(b *testing.B) {
	for _, rows := range []int{1 << 20, 10 << 20} {
		b.Run(fmt.Sprintf("rows=%dM", rows>>20), func(b *testing.B) { benchTable(b, rows) })
	}
}

func benchTable(b *testing.B, rows int) {
	const dim, batch = 16, 1024
	tab, err := New(Options{Dim: dim, Slots: []float32{0.1}, Init: Initializer{UniformLimit: 0.01, Seed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	all := make([]int64, rows)
	for i := range all {
		all[i] = int64(mix(uint64(i))) // hashed ids, as a model without a vocabulary has them
	}
	out := make([]float32, 4096*dim)
	for lo := 0; lo < rows; lo += 4096 {
		ids := all[lo:min(lo+4096, rows)]
		if err := tab.Gather(ids, out[:len(ids)*dim]); err != nil {
			b.Fatal(err)
		}
	}
	// Batches of random rows, a different one each call, so that rows
	// come from memory as a training job's do, not from a cache one batch
	// fits in.
	const batches = 1024
	r := rand.New(rand.NewPCG(1, 2))
	allPos := make([]int, batches*batch)
	allIDs := make([]int64, batches*batch)
	for i := range allIDs {
		allPos[i] = r.IntN(rows)
		allIDs[i] = all[allPos[i]]
	}
	var pos []int
	var ids []int64
	call := 0
	next := func() {
		k := call % batches * batch
		pos, ids = allPos[k:k+batch], allIDs[k:k+batch]
		call++
	}
	// Written, so that they are memory of their own: never-written pages
	// all map the kernel's one zero page, which is always cached.
	vals, acc := make([]float32, rows*dim), make([]float32, rows*dim)
	for i := range vals {
		vals[i], acc[i] = float32(i%1000)*1e-4, 0.1
	}
	collapse(b, vals)
	collapse(b, acc)
	for i := range tab.shards {
		collapse(b, tab.shards[i].vals)
		collapse(b, tab.shards[i].rest)
	}
	grads := make([]float32, batch*dim)
	for i := range grads {
		grads[i] = float32(i%7) * 0.01
	}
	out = out[:batch*dim]
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := startThreadCPU()
			for b.Loop() {
				f()
			}
			cpu.report(b, batch)
			b.ReportMetric(tab.BytesPerRow(), "B/row")
		})
	}
	gather := func() { next(); _ = tab.Gather(ids, out) }
	gatherFixed := func() {
		next()
		for i, p := range pos {
			copy(out[i*dim:(i+1)*dim], vals[p*dim:])
		}
	}
	if *tableBenchAlternate > 0 {
		alternateGathers(b, *tableBenchAlternate, 3000, batch, gather, gatherFixed)
	}
	run("gather", gather)
	run("gather-fixed", gatherFixed)
	gatherRows, gatherRowsIndex := layoutGathers(b, rows, dim, recordStride, out, func() ([]int, []int64) { next(); return pos, ids })
	run("gather-fixed-rows", gatherRows)
	run("gather-fixed-rows-index", gatherRowsIndex)
	pipelined, parallel, inline, parallelPasses, inlinePasses := addressGathers(b, rows, dim, recordStride, out, func() ([]int, []int64) { next(); return pos, ids })
	run("gather-pipelined", pipelined)
	run("gather-parallel", parallel)
	run("gather-inline", inline)
	run("gather-parallel-passes", parallelPasses)
	run("gather-inline-passes", inlinePasses)
	run("adagrad", func() { next(); _, _ = tab.ApplyAdagrad(ids, grads, 0.001, 1) })
	run("adagrad-fixed", func() {
		next()
		for i, p := range pos {
			v, a, g := vals[p*dim:(p+1)*dim], acc[p*dim:(p+1)*dim], grads[i*dim:(i+1)*dim]
			for j, gj := range g {
				a[j] += gj * gj
				v[j] -= 0.001 * gj / float32(math.Sqrt(float64(a[j])))
			}
		}
	})
}

// metaFloats is the floats of a record's room for its count and version,
// and recordStride the floats of a record of 16 values and a slot.
const (
	metaFloats   = 4
	recordStride = metaFloats + 2*16
)

// layoutGathers returns BenchmarkTable's gather-fixed-rows and
// gather-fixed-rows-index: rows of stride floats laid out as records
// (count and version, value, slot), and an array of as many index slots
// as the table's; next gives each call's rows and ids.
func layoutGathers(b *testing.B, rows, dim, stride int, out []float32, next func() ([]int, []int64)) (gatherRows, gatherRowsIndex func()) {
	b.Helper()
	data := make([]float32, rows*stride)
	for i := range data {
		data[i] = float32(i % 1000)
	}
	// The table's index: numShards shards, each of the power of two of slots
	// that holds its rows at most 3/4 full.
	perShard := 8
	for 4*(rows/numShards) > 3*perShard {
		perShard *= 2
	}
	slots := make([]int64, 2*perShard*numShards) // 16 bytes a slot: id, row
	mask := uint64(len(slots)/2 - 1)
	for i := range slots {
		slots[i] = int64(i/2) % int64(rows)
	}
	// Each row in its id's slot (where ids collide, the last; the others
	// read another row, as costly).
	for p := range rows {
		slots[2*(mix(uint64(mix(uint64(p))))&mask)+1] = int64(p)
	}
	collapse(b, data)
	collapse(b, slots)
	var rowOf [1024]int
	var sink float32
	gatherRows = func() {
		pos, _ := next()
		for _, p := range pos {
			*(*int64)(unsafe.Pointer(&data[p*stride]))++
		}
		for i, p := range pos {
			copy(out[i*dim:(i+1)*dim], data[p*stride+metaFloats:])
		}
	}
	gatherRowsIndex = func() {
		_, ids := next()
		for i, id := range ids {
			rowOf[i] = int(slots[2*(mix(uint64(id))&mask)+1])
		}
		for _, p := range rowOf[:len(ids)] {
			*(*int64)(unsafe.Pointer(&data[p*stride]))++
			sink += data[p*stride+metaFloats]
		}
		for i, p := range rowOf[:len(ids)] {
			copy(out[i*dim:(i+1)*dim], data[p*stride+metaFloats:])
		}
	}
	b.Cleanup(func() { _ = sink })
	return gatherRows, gatherRowsIndex
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
