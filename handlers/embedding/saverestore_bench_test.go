package embedding

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/starwire/starwire/internal/cpuclock"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// filledTable returns a table of rows rows of dim floats with an Adagrad
// slot, every row looked up and updated once, as a ps holds them after
// training on hashed ids.
func filledTable(b *testing.B, rows, dim int) *Table {
	b.Helper()
	tab, err := New(Options{Dim: dim, Slots: []float32{0.1}, Init: Initializer{UniformLimit: 0.01, Seed: 1}})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, 4096)
	out := make([]float32, len(ids)*dim)
	grads := make([]float32, len(ids)*dim)
	for i := range grads {
		grads[i] = 0.01
	}
	for lo := 0; lo < rows; lo += len(ids) {
		n := min(len(ids), rows-lo)
		for i := range n {
			ids[i] = int64(mix(uint64(lo + i)))
		}
		if err := tab.Gather(ids[:n], out[:n*dim]); err != nil {
			b.Fatal(err)
		}
		if _, err := tab.ApplyAdagrad(ids[:n], grads[:n*dim], 0.1, 1); err != nil {
			b.Fatal(err)
		}
	}
	return tab
}

// loadSnapshot reads back what saveSnapshot wrote under prefix.
func loadSnapshot(b *testing.B, prefix string, dim int) *Snapshot {
	b.Helper()
	r, err := checkpoint.Open(prefix)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	read := func(name string) wire.Tensor {
		t, err := r.Read(name)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	keys, vals, freqs, vers, slot := read("emb-keys"), read("emb-values"), read("emb-freqs"), read("emb-versions"), read("emb/slot_0-values")
	return &Snapshot{
		Dim:      dim,
		IDs:      tensor.View[int64](keys.Data),
		Values:   tensor.View[float32](vals.Data),
		Slots:    [][]float32{tensor.View[float32](slot.Data)},
		Freqs:    tensor.View[int64](freqs.Data),
		Versions: tensor.View[int64](vers.Data),
	}
}

// BenchmarkSaveRestore saves a whole table of 16 floats and an Adagrad
// slot per row as a tensor_bundle under DeepRec's names (Snapshot, then
// the checkpoint writer SaveV2 uses) and restores it into an empty table
// (the checkpoint reader, then Restore, as KvResourceImportV2 does), and
// reports the rows and bytes of one save; ns/op is one save or restore.
func BenchmarkSaveRestore(b *testing.B) {
	const dim = 16
	for _, rows := range []int{1 << 20, 10 << 20} {
		tab := filledTable(b, rows, dim)
		dir := b.TempDir()
		prefix := filepath.Join(dir, "full")
		i := 0
		b.Run(fmt.Sprintf("save/rows=%dM", rows>>20), func(b *testing.B) {
			defer reportProcessCPU(b)()
			var size int64
			for b.Loop() {
				prefix = filepath.Join(dir, "full"+strconv.Itoa(i))
				size = saveSnapshot(b, prefix, tab.Snapshot())
				i++
			}
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(float64(rows), "rows")
		})
		b.Run(fmt.Sprintf("restore/rows=%dM", rows>>20), func(b *testing.B) {
			defer reportProcessCPU(b)()
			for b.Loop() {
				dst, err := New(Options{Dim: dim, Slots: []float32{0.1}})
				if err != nil {
					b.Fatal(err)
				}
				if err := dst.Restore(loadSnapshot(b, prefix, dim)); err != nil {
					b.Fatal(err)
				}
				if dst.Len() != rows {
					b.Fatalf("restored %d rows, want %d", dst.Len(), rows)
				}
			}
			b.ReportMetric(float64(rows), "rows")
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
