package embedding

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// saveSnapshot writes s as a one-shard checkpoint under prefix, with
// DeepRec's tensor names for a variable "emb", and returns its bytes.
func saveSnapshot(b *testing.B, prefix string, s *Snapshot) int64 {
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	n := int64(len(s.IDs))
	add := func(name string, dt wire.DataType, data []byte, shape ...int64) {
		t := wire.Tensor{DType: dt, Shape: shape, Data: data}
		if err := w.Add(name, &t); err != nil {
			b.Fatal(err)
		}
	}
	add("emb-keys", wire.DTInt64, tensor.Bytes(s.IDs), n)
	add("emb-values", wire.DTFloat, tensor.Bytes(s.Values), n, int64(s.Dim))
	add("emb-freqs", wire.DTInt64, tensor.Bytes(s.Freqs), n)
	add("emb-versions", wire.DTInt64, tensor.Bytes(s.Versions), n)
	for k, slot := range s.Slots {
		add("emb/slot_"+strconv.Itoa(k)+"-values", wire.DTFloat, tensor.Bytes(slot), n, int64(s.Dim))
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, f := range []string{checkpoint.IndexFile(prefix), checkpoint.DataFile(prefix, 0, 1)} {
		fi, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	return size
}

// BenchmarkIncrement saves a table of 1M rows of 16 floats with an
// Adagrad slot, 1% of whose rows were updated since the last save, as a
// full checkpoint (Snapshot) and as an increment (ChangedSince), each
// read from the table and written as a tensor_bundle, and reports the
// bytes written.
func BenchmarkIncrement(b *testing.B) {
	const rows, dim, touched = 1 << 20, 16, (1 << 20) / 100
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
		for i := range ids {
			ids[i] = int64(mix(uint64(lo + i)))
		}
		tab.Gather(ids, out)
		tab.ApplyAdagrad(ids, grads, 0.1, 1)
	}
	// Every 100th row updated at step 2.
	few := make([]int64, 0, touched+1)
	for i := 0; i < rows; i += 100 {
		few = append(few, int64(mix(uint64(i))))
	}
	g := make([]float32, len(few)*dim)
	if _, err := tab.ApplyAdagrad(few, g, 0.1, 2); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for _, tc := range []struct {
		name string
		read func() *Snapshot
	}{
		{"full", tab.Snapshot},
		{"increment", func() *Snapshot { return tab.ChangedSince(2) }},
	} {
		b.Run(tc.name+"/rows=1M/touched=1%", func(b *testing.B) {
			var size int64
			var saved int
			i := 0
			for b.Loop() {
				s := tc.read()
				saved = len(s.IDs)
				size = saveSnapshot(b, filepath.Join(dir, tc.name+strconv.Itoa(i)), s)
				i++
			}
			b.ReportMetric(float64(size), "bytes")
			b.ReportMetric(float64(saved), "rows")
		})
	}
}
