package checkpoint

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/starwire/starwire/wire"
)

const tfPrefix = "testdata/tf-half-plus-three/variables"

func scalarF32(v float32) *wire.Tensor {
	return &wire.Tensor{DType: wire.DTFloat, Shape: []int64{}, Data: binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))}
}

// TestReadTensorFlowCheckpoint reads the checkpoint TensorFlow wrote.
func TestReadTensorFlowCheckpoint(t *testing.T) {
	r, err := Open(tfPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want := map[string]float32{"a": 0.5, "b": 3, "c": 3}
	if got := len(r.Entries()); got != len(want) {
		t.Fatalf("%d entries, want %d: %v", got, len(want), r.Entries())
	}
	for _, e := range r.Entries() {
		if e.DType != wire.DTFloat || len(e.Shape) != 0 || e.Slices != nil {
			t.Errorf("entry %+v, want a float scalar", e)
		}
		tt, err := r.Read(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		got := math.Float32frombits(binary.LittleEndian.Uint32(tt.Data))
		if len(tt.Data) != 4 || got != want[e.Name] {
			t.Errorf("%s = %v (%d bytes), want %v", e.Name, got, len(tt.Data), want[e.Name])
		}
	}
}

// TestWriteMatchesTensorFlow writes the same three tensors and expects
// TensorFlow's bytes, index and data file both.
func TestWriteMatchesTensorFlow(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "variables")
	w, err := NewWriter(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Data lands in the order of Adds, as in TensorFlow's file.
	for _, kv := range []struct {
		name string
		v    float32
	}{{"a", 0.5}, {"b", 3}, {"c", 3}} {
		if err := w.Add(kv.name, scalarF32(kv.v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".index", ".data-00000-of-00001"} {
		want, err := os.ReadFile(tfPrefix + f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(prefix + f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from TensorFlow's:\n got %x\nwant %x", f, got, want)
		}
	}
}
