package ops_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/starwire/starwire/internal/cpuclock"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
)

// BenchmarkKvSaveRestore saves, through the ps's ops, an embedding
// variable of 1M or 10M rows of 16 floats with an Adagrad slot in full
// (SaveV2 of the variable and its slot, as DeepRec's Saver asks for them)
// and restores it into a fresh ps (KvResourceImportV2 of each), the path
// a training job's checkpoint takes, to compare with the table's own
// (embedding's BenchmarkSaveRestore). ns/op is one save or restore: run
// it with -benchtime 1x.
func BenchmarkKvSaveRestore(b *testing.B) {
	for _, rows := range []int{1 << 20, 10 << 20} {
		b.Run(fmt.Sprintf("rows=%dM", rows>>20), func(b *testing.B) {
			env := benchTrain(b, rows)
			var prefix string
			i := 0
			b.Run("save", func(b *testing.B) {
				defer reportProcessCPU(b)()
				for b.Loop() {
					prefix = filepath.Join(env.CheckpointDir, "full"+strconv.Itoa(i))
					if _, err := Run(b, env, benchSave(prefix, false), nil); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(float64(bundleSize(b, prefix)), "bytes")
			})
			b.Run("restore", func(b *testing.B) {
				defer reportProcessCPU(b)()
				for b.Loop() {
					dst := envIn(b, env.CheckpointDir)
					if _, err := Run(b, dst, benchImport(prefix, false), nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// reportProcessCPU starts counting the process's CPU time (every thread,
// the garbage collector's too, user and system) and returns what reports
// it per op as cpu-s/op: on a machine others load, wall time is mostly
// waiting for a CPU.
func reportProcessCPU(b *testing.B) func() {
	start := cpuclock.Self()
	return func() {
		b.ReportMetric(cpuclock.Self().Sub(start).Total().Seconds()/float64(b.N), "cpu-s/op")
	}
}
