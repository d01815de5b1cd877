package embedding

import (
	"flag"
	"runtime"
	"testing"
)

var tableBenchAlternate = flag.Int("table_bench_alternate", 0, "BenchmarkTable: after the runs, time the table's gather and the fixed gather in turn this many rounds, so both see the same machine load, and log each round's CPU ns/id and their ratio")

// alternateGathers times hash and fixed, each for calls calls of batch
// ids, in turn for rounds rounds, on one locked thread, and logs each
// round's thread CPU per id: one run of each on a shared machine can see
// different neighbours, and the ratio within a round cannot.
func alternateGathers(b *testing.B, rounds, calls, batch int, hash, fixed func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	perID := func(f func()) float64 {
		start := threadTime()
		for range calls {
			f()
		}
		return float64((threadTime() - start).Nanoseconds()) / float64(calls*batch)
	}
	for r := range rounds {
		h, f := perID(hash), perID(fixed)
		b.Logf("round %d: gather %.1f ns/id, gather-fixed %.1f ns/id, ratio %.2fx", r, h, f, h/f)
	}
}
