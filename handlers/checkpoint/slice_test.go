package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/starwire/starwire/wire"
)

func TestParseShapeAndSlice(t *testing.T) {
	cases := []struct {
		spec  string
		full  []int64
		slice string
		ok    bool
	}{
		{"", nil, "", true},
		{"10 4 0,5:-", []int64{10, 4}, "0,5:-", true},
		{"10 4 5,5:1,3", []int64{10, 4}, "5,5:1,3", true},
		{"7 -", []int64{7}, "-", true},
		{"10 4 0,5", nil, "", false},     // rank mismatch
		{"10 4 6,5:-", nil, "", false},   // beyond the dimension
		{"10 x 0,5:-", nil, "", false},   // not a number
		{"-3 -", nil, "", false},         // negative dimension
		{"10 0,-1", nil, "", false},      // negative length
		{"0,5:-", nil, "", false},        // no shape
		{"10 4 0,5:-:-", nil, "", false}, // too many extents
	}
	for _, c := range cases {
		full, s, err := ParseShapeAndSlice(c.spec)
		if (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.spec, err, c.ok)
			continue
		}
		if !c.ok {
			if !errors.Is(err, ErrMismatch) {
				t.Errorf("%q: %v, want ErrMismatch", c.spec, err)
			}
			continue
		}
		if !slices.Equal(full, c.full) || s.String() != c.slice {
			t.Errorf("%q: %v %q, want %v %q", c.spec, full, s, c.full, c.slice)
		}
	}
}

// TestSignedNumIncreasing checks the examples of ordered_code.cc, the
// length boundaries of kBitsToLength and that order is kept.
func TestSignedNumIncreasing(t *testing.T) {
	cases := []struct {
		v    int64
		want string
	}{
		{0, "80"}, {5, "85"}, {-1, "7f"}, {63, "bf"}, {-64, "40"},
		{64, "c040"}, {-65, "3fbf"}, {0x424242, "f0424242"}, {-0x800, "3800"},
		{math.MaxInt64, "ffc07fffffffffffffff"}, {math.MinInt64, "003f8000000000000000"},
	}
	for _, c := range cases {
		if got := fmt.Sprintf("%x", appendSignedNumIncreasing(nil, c.v)); got != c.want {
			t.Errorf("%d: %s, want %s", c.v, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		a, b := rng.Int64()>>rng.IntN(64), rng.Int64()>>rng.IntN(64)
		if rng.IntN(2) == 0 {
			a = -a
		}
		ea, eb := appendSignedNumIncreasing(nil, a), appendSignedNumIncreasing(nil, b)
		if c := bytes.Compare(ea, eb); c != cmpInt(a, b) {
			t.Fatalf("%d vs %d: encodings %x vs %x compare %d", a, b, ea, eb, c)
		}
	}
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestSliceKey: EncodeTensorNameSlice of "a\x00b" and "0,5:-".
func TestSliceKey(t *testing.T) {
	s := Slice{Start: []int64{0, 0}, Length: []int64{5, -1}}
	got := sliceKey("a\x00b\xff", s)
	want := "\x00" + "a\x00\xffb\xff\x00\x00\x01" + "\x01\x02" + "\x80\x85" + "\x80\x7f"
	if got != want {
		t.Errorf("key %x, want %x", got, want)
	}
	// A whole dimension spelled out stays spelled out, as in TensorFlow.
	spelled := Slice{Start: []int64{0, 0}, Length: []int64{5, 3}}.canonical([]int64{10, 3})
	if got := sliceKey("a", spelled); got[len(got)-2:] != "\x80\x83" {
		t.Errorf("spelled key %x", got)
	}
	if p := spelled.toProto(); p.Extent[1].GetLength() != 3 || p.Extent[1].HasLength == nil {
		t.Errorf("spelled extent %v", p.Extent[1])
	}
}

// partition splits full's first dimension into n parts, as
// tf.fixed_size_partitioner does (earlier parts one larger), the other
// dimensions whole ("-").
func partition(full []int64, n int) []Slice { return partitionSpelled(full, n, false) }

// partitionSpelled is partition, with the unsplit dimensions spelled out
// ("0,4") when spelled, as Python's SaveSliceInfo writes them.
func partitionSpelled(full []int64, n int, spelled bool) []Slice {
	var out []Slice
	start := int64(0)
	for i := range n {
		l := full[0] / int64(n)
		if int64(i) < full[0]%int64(n) {
			l++
		}
		s := Slice{Start: make([]int64, len(full)), Length: make([]int64, len(full))}
		s.Start[0], s.Length[0] = start, l
		for d := 1; d < len(full); d++ {
			s.Length[d] = FullLength
			if spelled {
				s.Length[d] = full[d]
			}
		}
		out = append(out, s)
		start += l
	}
	return out
}

func sliceOf(t *testing.T, full *wire.Tensor, s Slice) *wire.Tensor {
	t.Helper()
	b, err := s.bounds(full.Shape)
	if err != nil {
		t.Fatal(err)
	}
	x, err := extract(*full, box{start: make([]int64, len(full.Shape)), length: full.Shape}, b)
	if err != nil {
		t.Fatal(err)
	}
	return &x
}

// TestSlicedNIntoM saves variables partitioned by N shards (each its own
// writer, merged) and restores them whole and partitioned into M parts.
func TestSlicedNIntoM(t *testing.T) {
	for _, dt := range []wire.DataType{wire.DTFloat, wire.DTString, wire.DTComplex128, wire.DTBool} {
		for _, nm := range [][2]int{{1, 3}, {2, 3}, {3, 2}, {4, 4}, {5, 1}} {
			n, m := nm[0], nm[1]
			t.Run(fmt.Sprintf("%v/%dto%d", dt, n, m), func(t *testing.T) {
				full := []int64{11, 3}
				v := randTensor(dt, full, uint64(n*10+m))
				dir := t.TempDir()
				final := filepath.Join(dir, "model.ckpt-7")
				var parts []string
				for i, s := range partitionSpelled(full, n, n%2 == 0) {
					prefix := filepath.Join(dir, "model.ckpt-7_temp", fmt.Sprintf("part-%05d-of-%05d", i, n))
					w, err := NewWriter(prefix, 0, 1)
					if err != nil {
						t.Fatal(err)
					}
					if err := w.AddSlice("emb", full, s, sliceOf(t, v, s)); err != nil {
						t.Fatal(err)
					}
					plain := randTensor(wire.DTInt64, []int64{2}, uint64(i))
					if err := w.Add(fmt.Sprintf("step%d", i), plain); err != nil {
						t.Fatal(err)
					}
					if err := w.Finish(); err != nil {
						t.Fatal(err)
					}
					parts = append(parts, prefix)
				}
				if err := Merge(parts, final, true); err != nil {
					t.Fatal(err)
				}
				r := open(t, final)
				e, ok := r.Entry("emb")
				if !ok || len(e.Slices) != n && n > 1 {
					t.Fatalf("entry %+v, want %d slices", e, n)
				}
				got, err := r.Read("emb")
				if err != nil {
					t.Fatal(err)
				}
				equalTensor(t, "whole", got, v)
				for j, s := range partition(full, m) {
					got, err := r.ReadSlice("emb", s)
					if err != nil {
						t.Fatal(err)
					}
					equalTensor(t, fmt.Sprintf("part %d of %d", j, m), got, sliceOf(t, v, s))
				}
				// A block across parts in both dimensions.
				s := Slice{Start: []int64{2, 1}, Length: []int64{7, 2}}
				got, err = r.ReadSlice("emb", s)
				if err != nil {
					t.Fatal(err)
				}
				equalTensor(t, "block", got, sliceOf(t, v, s))
				if len(r.Entries()) != n+1 {
					t.Errorf("%d entries, want %d (slice keys hidden)", len(r.Entries()), n+1)
				}
			})
		}
	}
}

// TestSliceMissing: a part never saved cannot be read, and slices out of
// bounds are refused.
func TestSliceMissing(t *testing.T) {
	full := []int64{6, 2}
	v := randTensor(wire.DTInt32, full, 3)
	prefix := tempPrefix(t, "partial")
	w, _ := NewWriter(prefix, 0, 1)
	s := Slice{Start: []int64{0, 0}, Length: []int64{3, -1}}
	if err := w.AddSlice("v", full, s, sliceOf(t, v, s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	r := open(t, prefix)
	if _, err := r.Read("v"); !errors.Is(err, ErrMismatch) {
		t.Errorf("Read of half-saved tensor: %v, want ErrMismatch", err)
	}
	got, err := r.ReadSlice("v", Slice{Start: []int64{1, 1}, Length: []int64{2, 1}})
	if err != nil {
		t.Fatal(err)
	}
	equalTensor(t, "saved part", got, sliceOf(t, v, Slice{Start: []int64{1, 1}, Length: []int64{2, 1}}))
	if _, err := r.ReadSlice("v", Slice{Start: []int64{5, 0}, Length: []int64{2, 1}}); !errors.Is(err, ErrMismatch) {
		t.Errorf("slice beyond the shape: %v", err)
	}
}

// TestAddSliceWhole: a slice covering everything is a plain tensor, as
// TensorFlow saves it; mismatched parts are refused.
func TestAddSliceWhole(t *testing.T) {
	full := []int64{2, 2}
	v := randTensor(wire.DTFloat, full, 1)
	prefix := tempPrefix(t, "whole")
	w, _ := NewWriter(prefix, 0, 1)
	if err := w.AddSlice("v", full, Slice{Start: []int64{0, 0}, Length: []int64{2, 2}}, v); err != nil {
		t.Fatal(err)
	}
	bad := randTensor(wire.DTFloat, []int64{1, 2}, 1)
	if err := w.AddSlice("u", full, Slice{Start: []int64{0, 0}, Length: []int64{2, -1}}, bad); !errors.Is(err, ErrMismatch) {
		t.Errorf("slice of the wrong shape: %v", err)
	}
	w.Abort()
	prefix = tempPrefix(t, "whole2")
	w, _ = NewWriter(prefix, 0, 1)
	if err := w.AddSlice("v", full, Slice{}, v); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	e, _ := open(t, prefix).Entry("v")
	if e.Slices != nil {
		t.Errorf("whole slice saved as slices %v", e.Slices)
	}
}
