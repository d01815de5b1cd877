package ops

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

// TestUniqueIntsMatchesMap checks the hash table against the map-based
// unique on ids with many repeats, negative ids, ids that collide in the
// table and the empty vector, for both index types.
func TestUniqueIntsMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := [][]int64{nil, {0}, {-1, -1, 0, 1 << 62, -(1 << 62), 1 << 62}}
	for _, n := range []int{1, 7, 100, 5000} {
		x := make([]int64, n)
		for i := range x {
			x[i] = rng.Int64N(int64(n)/3+1) - int64(n)/6
		}
		inputs = append(inputs, x)
		strided := make([]int64, n) // multiples of a power of two: one hash bucket apart or worse
		for i := range strided {
			strided[i] = int64(rng.IntN(n+1)) << 32
		}
		inputs = append(inputs, strided)
	}
	for _, out := range []wire.DataType{wire.DTInt32, wire.DTInt64} {
		for _, x := range inputs {
			shape := []int64{int64(len(x))}
			wantIdx, gotIdx := mustTensor(t, out, shape), mustTensor(t, out, shape)
			want, err := unique(wire.DTInt64, x, &wantIdx)
			if err != nil {
				t.Fatal(err)
			}
			got, err := uniqueInts(wire.DTInt64, x, &gotIdx)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tensor.View[int64](got.Data), tensor.View[int64](want.Data)) || !slices.Equal(gotIdx.Data, wantIdx.Data) {
				t.Fatalf("out_idx %v, x %v: uniqueInts = %v %v, want %v %v", out, x, tensor.View[int64](got.Data), gotIdx.Data, tensor.View[int64](want.Data), wantIdx.Data)
			}
		}
	}
	x32 := []int32{5, -5, 5, 0, -5}
	idx := mustTensor(t, wire.DTInt32, []int64{5})
	y, err := uniqueInts(wire.DTInt32, x32, &idx)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.View[int32](y.Data); !slices.Equal(got, []int32{5, -5, 0}) || !slices.Equal(tensor.View[int32](idx.Data), []int32{0, 1, 0, 2, 1}) {
		t.Fatalf("int32: %v %v", got, tensor.View[int32](idx.Data))
	}
}

func mustTensor(t testing.TB, dt wire.DataType, shape []int64) wire.Tensor {
	t.Helper()
	r, err := tensor.New(dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func BenchmarkUnique(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]int64, 2048)
	for i := range x {
		x[i] = rng.Int64N(100000)
		if i%2 == 1 {
			x[i] = x[rng.IntN(i)]
		}
	}
	for _, tc := range []struct {
		name string
		f    func(wire.DataType, []int64, *wire.Tensor) (wire.Tensor, error)
	}{{"map", unique[int64]}, {"table", uniqueInts[int64]}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			idx := mustTensor(b, wire.DTInt32, []int64{int64(len(x))})
			for b.Loop() {
				y, err := tc.f(wire.DTInt64, x, &idx)
				if err != nil {
					b.Fatal(err)
				}
				y.Buf.Release()
			}
		})
	}
}
