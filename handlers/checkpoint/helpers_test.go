package checkpoint

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/starwire/starwire/wire"
)

// allDTypes lists every type wire can carry.
var allDTypes = []wire.DataType{
	wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTUint8, wire.DTInt16, wire.DTInt8,
	wire.DTString, wire.DTComplex64, wire.DTInt64, wire.DTBool, wire.DTQint8, wire.DTQuint8,
	wire.DTQint32, wire.DTBfloat16, wire.DTQint16, wire.DTQuint16, wire.DTUint16,
	wire.DTComplex128, wire.DTHalf, wire.DTUint32, wire.DTUint64,
}

// randTensor returns a tensor of dt and shape whose elements are numbered,
// so misplaced elements show: element i of a string tensor is "s<i>" plus
// some bytes that need escaping, of a numeric one random bytes seeded by i.
func randTensor(dt wire.DataType, shape []int64, seed uint64) *wire.Tensor {
	t := &wire.Tensor{DType: dt, Shape: shape}
	n, _ := t.NumElements()
	rng := rand.New(rand.NewPCG(seed, 1))
	if dt == wire.DTString {
		elems := make([][]byte, n)
		for i := range elems {
			e := fmt.Appendf(nil, "s%d", i)
			for range rng.IntN(4) {
				e = append(e, byte(rng.IntN(256)))
			}
			elems[i] = e
		}
		if n > 2 {
			elems[1] = nil // an empty string
		}
		t.Data = wire.AppendStrings([]byte{}, elems)
		return t
	}
	t.Data = make([]byte, n*int64(dt.Size()))
	for i := range t.Data {
		t.Data[i] = byte(rng.IntN(256))
	}
	return t
}

// elemsOf returns t's elements as byte strings, for comparisons that work
// for every dtype.
func elemsOf(t *testing.T, x wire.Tensor) [][]byte {
	t.Helper()
	if x.DType == wire.DTString {
		e, err := x.Strings(nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	sz := x.DType.Size()
	var out [][]byte
	for i := 0; i+sz <= len(x.Data); i += sz {
		out = append(out, x.Data[i:i+sz])
	}
	return out
}

func equalTensor(t *testing.T, what string, got wire.Tensor, want *wire.Tensor) {
	t.Helper()
	if got.DType != want.DType || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
		t.Fatalf("%s: got %v%v, want %v%v", what, got.DType, got.Shape, want.DType, want.Shape)
	}
	g, w := elemsOf(t, got), elemsOf(t, *want)
	if len(g) != len(w) {
		t.Fatalf("%s: %d elements, want %d", what, len(g), len(w))
	}
	for i := range g {
		if !bytes.Equal(g[i], w[i]) {
			t.Fatalf("%s: element %d = %x, want %x", what, i, g[i], w[i])
		}
	}
}

// save writes tensors (added in the order of names) as one checkpoint.
func save(t testing.TB, prefix string, names []string, tensors map[string]*wire.Tensor) {
	t.Helper()
	w, err := NewWriter(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := w.Add(n, tensors[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

func tempPrefix(t testing.TB, name string) string { return filepath.Join(t.TempDir(), name) }

func open(t testing.TB, prefix string) *Reader {
	t.Helper()
	r, err := Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
