package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/starwire/starwire/wire"
)

// tfShardedPrefix is a checkpoint two TensorFlow ps tasks saved through a
// sharded Saver (testdata/README.md): an embedding partitioned over both,
// its Adagrad slot, Adam's slots and global_step.
const tfShardedPrefix = "testdata/tf-sharded-slices/model.ckpt-3"

// A tfTensor is one tensor as tf.train.load_checkpoint read it.
type tfTensor struct {
	DType  string    `json:"dtype"`
	Shape  []int64   `json:"shape"`
	Values []float64 `json:"values"` // exact: float32 and small int64 values
}

func tfShardedValues(t *testing.T) map[string]tfTensor {
	b, err := os.ReadFile("testdata/tf-sharded-slices/values.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]tfTensor
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// tfBytes encodes values as TensorFlow holds a tensor of dtype.
func tfBytes(t *testing.T, dtype string, values []float64) (wire.DataType, []byte) {
	var out []byte
	switch dtype {
	case "float32":
		for _, v := range values {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(v)))
		}
		return wire.DTFloat, out
	case "int64":
		for _, v := range values {
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(v)))
		}
		return wire.DTInt64, out
	}
	t.Fatalf("dtype %s in values.json", dtype)
	return 0, nil
}

// TestReadTensorFlowShardedCheckpoint reads what two TensorFlow ps saved
// and TensorFlow merged: every tensor as TensorFlow reads it, the
// partitioned ones assembled from their two slices, and a block across
// both slices as a third ps's RestoreV2 asks for it.
func TestReadTensorFlowShardedCheckpoint(t *testing.T) {
	want := tfShardedValues(t)
	r, err := Open(tfShardedPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := len(r.Entries()); got != len(want) {
		t.Errorf("%d entries, TensorFlow lists %d", got, len(want))
	}
	for _, e := range r.Entries() {
		w, ok := want[e.Name]
		if !ok {
			t.Errorf("entry %q, which TensorFlow does not list", e.Name)
			continue
		}
		dt, data := tfBytes(t, w.DType, w.Values)
		if e.DType != dt || !slices.Equal(e.Shape, w.Shape) {
			t.Errorf("%s is %v%v, TensorFlow reads %v%v", e.Name, e.DType, e.Shape, dt, w.Shape)
		}
		got, err := r.Read(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Data, data) {
			t.Errorf("%s differs from TensorFlow's reading", e.Name)
		}
	}
	if n := len(mustEntry(t, r, "embedding").Slices); n != 2 {
		t.Fatalf("embedding saved in %d slices, want 2", n)
	}
	// Rows 3..6 of the 10: two from each ps's slice.
	got, err := r.ReadSlice("embedding", Slice{Start: []int64{3, 0}, Length: []int64{4, FullLength}})
	if err != nil {
		t.Fatal(err)
	}
	_, whole := tfBytes(t, "float32", want["embedding"].Values)
	if row := 2 * 4; !slices.Equal(got.Shape, []int64{4, 2}) || !bytes.Equal(got.Data, whole[3*row:7*row]) {
		t.Errorf("rows 3..6 of embedding: %v %x, want rows of TensorFlow's %x", got.Shape, got.Data, whole[3*row:7*row])
	}
}

func mustEntry(t *testing.T, r *Reader, name string) Entry {
	e, ok := r.Entry(name)
	if !ok {
		t.Fatalf("no entry %q", name)
	}
	return e
}

// A savedPiece is one tensor or slice a ps's SaveV2 added, where its data
// lies in the checkpoint.
type savedPiece struct {
	name   string
	slice  *Slice // nil: saved whole
	full   []int64
	shard  int32
	offset int64
}

// TestWriteMatchesTensorFlowSharded saves what each TensorFlow ps saved,
// in the order it saved it, one shard per ps as SaveV2 writes them, and
// merges the shards: index and data files must be TensorFlow's, byte for
// byte.
func TestWriteMatchesTensorFlowSharded(t *testing.T) {
	r, err := Open(tfShardedPrefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var pieces []savedPiece
	for _, e := range r.Entries() {
		if e.Slices == nil {
			p, err := r.lookup(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			pieces = append(pieces, savedPiece{name: e.Name, shard: p.ShardId, offset: p.Offset})
			continue
		}
		for _, s := range e.Slices {
			p, err := r.lookup(sliceKey(e.Name, s))
			if err != nil {
				t.Fatal(err)
			}
			pieces = append(pieces, savedPiece{name: e.Name, slice: &s, full: e.Shape, shard: p.ShardId, offset: p.Offset})
		}
	}
	slices.SortFunc(pieces, func(a, b savedPiece) int {
		return cmp.Or(cmp.Compare(a.shard, b.shard), cmp.Compare(a.offset, b.offset))
	})

	dir := t.TempDir()
	dst := filepath.Join(dir, "model.ckpt-3")
	parts := []string{filepath.Join(dir, "model.ckpt-3_temp", "part-00000-of-00002"), filepath.Join(dir, "model.ckpt-3_temp", "part-00001-of-00002")}
	for shard, part := range parts {
		w, err := NewWriter(part, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pieces {
			if p.shard != int32(shard) {
				continue
			}
			if p.slice == nil {
				err = addRead(r, w, p.name)
			} else {
				err = addSliceRead(r, w, p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	if err := Merge(parts, dst, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".index", ".data-00000-of-00002", ".data-00001-of-00002"} {
		want, err := os.ReadFile(tfShardedPrefix + f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dst + f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from TensorFlow's:\n got %x\nwant %x", f, got, want)
		}
	}
	if _, err := os.Stat(filepath.Dir(parts[0])); !os.IsNotExist(err) {
		t.Errorf("the shards' directory is still there: %v", err)
	}
}

func addRead(r *Reader, w *Writer, name string) error {
	t, err := r.Read(name)
	if err != nil {
		return err
	}
	return w.Add(name, &t)
}

func addSliceRead(r *Reader, w *Writer, p savedPiece) error {
	t, err := r.ReadSlice(p.name, *p.slice)
	if err != nil {
		return err
	}
	return w.AddSlice(p.name, p.full, *p.slice, &t)
}
