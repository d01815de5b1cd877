package checkpoint

import (
	"fmt"
	"testing"

	"github.com/starwire/starwire/wire"
)

const benchBytes = 1 << 20

func BenchmarkAdd(b *testing.B) {
	v := randTensor(wire.DTFloat, []int64{benchBytes / 4}, 1)
	w, err := NewWriter(tempPrefix(b, "bench"), 0, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Abort()
	b.SetBytes(benchBytes)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := w.Add(fmt.Sprint(i), v); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkRead(b *testing.B) {
	for _, dt := range []wire.DataType{wire.DTFloat, wire.DTString} {
		b.Run(dt.String(), func(b *testing.B) {
			n := int64(benchBytes / 4)
			if dt == wire.DTString {
				n = benchBytes / 8
			}
			v := randTensor(dt, []int64{n}, 1)
			prefix := tempPrefix(b, "bench")
			save(b, prefix, []string{"v"}, map[string]*wire.Tensor{"v": v})
			r := open(b, prefix)
			b.SetBytes(int64(len(v.Data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Read("v"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadSlice restores one of 4 parts from a tensor saved in 3.
func BenchmarkReadSlice(b *testing.B) {
	full := []int64{benchBytes / 4 / 64, 64}
	v := randTensor(wire.DTFloat, full, 1)
	prefix := tempPrefix(b, "bench")
	w, _ := NewWriter(prefix, 0, 1)
	for _, s := range partition(full, 3) {
		bx, _ := s.bounds(full)
		part, _ := extract(*v, box{start: []int64{0, 0}, length: full}, bx)
		if err := w.AddSlice("v", full, s, &part); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	r := open(b, prefix)
	want := partition(full, 4)[1]
	b.SetBytes(benchBytes / 4)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadSlice("v", want); err != nil {
			b.Fatal(err)
		}
	}
}
