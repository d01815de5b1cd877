package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint/table"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// writeRaw writes a checkpoint whose index holds entries verbatim, and
// data as shard 0 of numShards.
func writeRaw(t *testing.T, numShards int32, entries map[string]*tfpb.BundleEntryProto, data []byte) string {
	t.Helper()
	prefix := tempPrefix(t, "hostile")
	h := &tfpb.BundleHeaderProto{NumShards: numShards, Version: &tfpb.VersionDef{Producer: 1}}
	if err := writeIndex(IndexFile(prefix), h, entries); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(DataFile(prefix, 0, int(numShards)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return prefix
}

func f32Entry(shape []int64, offset, size int64, crc uint32) *tfpb.BundleEntryProto {
	return &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_FLOAT, Shape: shapeProto(shape), Offset: offset, Size: size, Crc32C: crc}
}

// TestHostileEntries: entries that lie about sizes, offsets, counts and
// checksums are errors naming the file and the tensor, never a panic or
// an allocation the file's size does not justify.
func TestHostileEntries(t *testing.T) {
	data := bytes.Repeat([]byte{1, 2, 3, 4}, 4)
	good := table.MaskCRC(table.CRC32C(data))
	str := func(n int64, size int64) *tfpb.BundleEntryProto {
		return &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_STRING, Shape: shapeProto([]int64{n}), Size: size}
	}
	cases := []struct {
		name   string
		entry  *tfpb.BundleEntryProto
		atOpen bool
		want   error
	}{
		{"huge size", f32Entry([]int64{1 << 60}, 0, 1<<62, good), false, ErrCorrupt},
		{"size beyond file", f32Entry([]int64{8}, 0, 32, good), false, ErrCorrupt},
		{"offset beyond file", f32Entry([]int64{4}, 1<<50, 16, good), false, ErrCorrupt},
		{"size not shape", f32Entry([]int64{3}, 0, 16, good), false, ErrCorrupt},
		{"bad crc", f32Entry([]int64{4}, 0, 16, good^1), false, ErrCorrupt},
		{"overflowing shape", f32Entry([]int64{1 << 40, 1 << 40}, 0, 16, good), true, ErrCorrupt},
		{"negative dim", f32Entry([]int64{-4}, 0, 16, good), true, ErrCorrupt},
		{"negative offset", f32Entry([]int64{4}, -1, 16, good), true, ErrCorrupt},
		{"bad dtype", &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_VARIANT, Shape: shapeProto(nil)}, true, ErrCorrupt},
		{"shard out of range", &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_FLOAT, Shape: shapeProto([]int64{4}), ShardId: 3, Size: 16}, true, ErrCorrupt},
		{"a billion strings", str(1<<30, 16), false, ErrCorrupt},
		{"string lengths lie", str(2, 16), false, ErrCorrupt},
		{"slice beyond shape", &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_FLOAT, Shape: shapeProto([]int64{4}),
			Slices: []*tfpb.TensorSliceProto{Slice{Start: []int64{2}, Length: []int64{5}}.toProto()}}, true, ErrCorrupt},
		{"slice entry missing", &tfpb.BundleEntryProto{Dtype: tfpb.DataType_DT_FLOAT, Shape: shapeProto([]int64{1 << 40}),
			Slices: []*tfpb.TensorSliceProto{Slice{Start: []int64{2}, Length: []int64{5}}.toProto()}}, false, ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := writeRaw(t, 1, map[string]*tfpb.BundleEntryProto{"victim": c.entry}, data)
			r, err := Open(prefix)
			if err == nil {
				defer r.Close()
				if c.atOpen {
					t.Fatal("Open accepted it")
				}
				_, err = r.Read("victim")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("%v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), "victim") || !strings.Contains(err.Error(), filepath.Base(prefix)) {
				t.Errorf("error %q names neither the tensor nor the file", err)
			}
		})
	}
}

// TestDamagedFiles: a missing data file, a truncated one, a flipped data
// byte, a truncated index.
func TestDamagedFiles(t *testing.T) {
	tensors := map[string]*wire.Tensor{
		"f": randTensor(wire.DTFloat, []int64{8}, 1),
		"s": randTensor(wire.DTString, []int64{5}, 2),
	}
	names := []string{"f", "s"}
	for _, damage := range []struct {
		name string
		do   func(prefix string) error
	}{
		{"missing data", func(p string) error { return os.Remove(DataFile(p, 0, 1)) }},
		{"truncated data", func(p string) error { return os.Truncate(DataFile(p, 0, 1), 20) }},
		{"flipped data", func(p string) error { return flip(DataFile(p, 0, 1)) }},
	} {
		t.Run(damage.name, func(t *testing.T) {
			prefix := tempPrefix(t, "ckpt")
			save(t, prefix, names, tensors)
			if err := damage.do(prefix); err != nil {
				t.Fatal(err)
			}
			r := open(t, prefix)
			failed := 0
			for _, n := range names {
				if _, err := r.Read(n); err != nil {
					if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"`+n+`"`) {
						t.Errorf("%s: %v", n, err)
					}
					failed++
				}
			}
			if failed == 0 {
				t.Error("damage went unnoticed")
			}
		})
	}
	prefix := tempPrefix(t, "ckpt")
	save(t, prefix, names, tensors)
	idx, _ := os.ReadFile(IndexFile(prefix))
	for n := range len(idx) {
		os.WriteFile(IndexFile(prefix), idx[:n], 0o644)
		if _, err := Open(prefix); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "ckpt.index") {
			t.Fatalf("index truncated to %d: %v", n, err)
		}
	}
	if _, err := Open(tempPrefix(t, "none")); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing index: %v", err)
	}
}

// flip changes the middle byte of a file.
func flip(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	b[len(b)/2] ^= 0x10
	return os.WriteFile(path, b, 0o644)
}

// openMemory opens a checkpoint from bytes: the index and one data file
// serving every shard.
func openMemory(index, data []byte) (*Reader, error) {
	r, err := parseIndex("fuzz", "fuzz.index", index)
	if err != nil {
		return nil, err
	}
	for id := range int32(r.numShards) {
		r.shards[id] = &shardFile{f: bytes.NewReader(data), c: io.NopCloser(nil), size: int64(len(data))}
	}
	return r, nil
}

func FuzzReader(f *testing.F) {
	seed := func(index, data []byte) {
		f.Add(append(append([]byte{byte(len(index) >> 8), byte(len(index))}, index...), data...))
	}
	idx, _ := os.ReadFile(tfPrefix + ".index")
	data, _ := os.ReadFile(tfPrefix + ".data-00000-of-00001")
	seed(idx, data)
	// A sliced float tensor and a string tensor.
	prefix := filepath.Join(f.TempDir(), "seed")
	w, _ := NewWriter(prefix, 0, 1)
	full := []int64{4, 2}
	v := randTensor(wire.DTFloat, full, 1)
	for _, s := range []Slice{{Start: []int64{0, 0}, Length: []int64{1, -1}}, {Start: []int64{1, 0}, Length: []int64{3, -1}}} {
		b, _ := s.bounds(full)
		part, _ := extract(*v, box{start: []int64{0, 0}, length: full}, b)
		w.AddSlice("part", full, s, &part)
	}
	w.Add("s", randTensor(wire.DTString, []int64{3}, 2))
	if err := w.Finish(); err != nil {
		f.Fatal(err)
	}
	idx, _ = os.ReadFile(IndexFile(prefix))
	data, _ = os.ReadFile(DataFile(prefix, 0, 1))
	seed(idx, data)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 2 {
			return
		}
		n := min(int(in[0])<<8|int(in[1]), len(in)-2)
		r, err := openMemory(in[2:2+n], in[2+n:])
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
				t.Fatalf("Open error without a sentinel: %v", err)
			}
			return
		}
		for _, e := range r.Entries() {
			got, err := r.Read(e.Name)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrMismatch) {
					t.Fatalf("Read(%q) error without a sentinel: %v", e.Name, err)
				}
				continue
			}
			if err := got.Check(); err != nil || got.DType != e.DType {
				t.Fatalf("Read(%q) returned a bad tensor: %v", e.Name, err)
			}
			if got.DType == wire.DTString {
				if _, err := got.Strings(nil); err != nil {
					t.Fatalf("Read(%q): %v", e.Name, err)
				}
			}
			if len(e.Shape) > 0 && e.Shape[0] > 1 {
				s := Slice{Start: make([]int64, len(e.Shape)), Length: make([]int64, len(e.Shape))}
				s.Start[0], s.Length[0] = 1, e.Shape[0]-1
				for d := 1; d < len(e.Shape); d++ {
					s.Length[d] = FullLength
				}
				if _, err := r.ReadSlice(e.Name, s); err != nil {
					t.Fatalf("ReadSlice(%q, %s) failed after Read succeeded: %v", e.Name, s, err)
				}
			}
		}
	})
}
