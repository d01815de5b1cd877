package clicks

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPopularityMatchesZipf: values are drawn with probability proportional
// to (1+v)^-skew, the head's values one by one and the tail's as a whole,
// within five standard deviations of a binomial count.
func TestPopularityMatchesZipf(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"head only", 1000},
		{"head and tail", headValues + 50000},
		{"one value", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const skew, draws = 1.2, 2_000_000
			p := newPopularity(skew, tc.n)
			rng := rand.New(rand.NewPCG(1, 2))
			tail := p.tailZipf(rng)
			head := min(tc.n, headValues)
			counts := make([]int, head+1) // the last: the tail's values
			for range draws {
				v := p.draw(rng, tail)
				if v >= uint64(tc.n) {
					t.Fatalf("value %d of %d", v, tc.n)
				}
				counts[min(v, uint64(head))]++
			}
			total := 0.0
			for v := range tc.n {
				total += math.Pow(1+float64(v), -skew)
			}
			check := func(what string, got int, want float64) {
				t.Helper()
				sd := math.Sqrt(draws * want * (1 - want))
				if math.Abs(float64(got)-draws*want) > 5*sd+1 {
					t.Errorf("%s: %d draws, want %.0f ± %.0f", what, got, draws*want, sd)
				}
			}
			for _, v := range []int{0, 1, 2, 10, head / 2, head - 1} {
				if v < head {
					check(fmt.Sprintf("value %d", v), counts[v], math.Pow(1+float64(v), -skew)/total)
				}
			}
			if tc.n > head {
				check("the tail", counts[head], tailMass(skew, head, tc.n)/total)
			}
		})
	}
}

// BenchmarkDrawValue compares a field value's draw with rand.Zipf's, on the
// job's default vocabulary.
func BenchmarkDrawValue(b *testing.B) {
	const skew, n = 1.2, 100000
	rng := rand.New(rand.NewPCG(1, 2))
	b.Run("popularity", func(b *testing.B) {
		p := newPopularity(skew, n)
		tail := p.tailZipf(rng)
		b.ReportAllocs()
		var sink uint64
		for b.Loop() {
			sink += p.draw(rng, tail)
		}
		_ = sink
	})
	b.Run("rand.Zipf", func(b *testing.B) {
		z := rand.NewZipf(rng, skew, 1, n-1)
		b.ReportAllocs()
		var sink uint64
		for b.Loop() {
			sink += z.Uint64()
		}
		_ = sink
	})
}

// TestDrawAllMatchesDraw checks that drawing values ahead returns the
// values, and leaves the source where, one draw at a time would, with and
// without a tail, however many values a call asks for.
func TestDrawAllMatchesDraw(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		skew float64
	}{
		{"no tail", 1000, 1.2},
		{"default", 100000, 1.2},
		{"heavy tail", 1 << 20, 1.05},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPopularity(tc.skew, tc.n)
			oneSrc, aheadSrc := rand.NewPCG(3, 4), rand.NewPCG(3, 4)
			one, ahead := rand.New(oneSrc), rand.New(aheadSrc)
			oneTail, aheadTail := p.tailZipf(one), p.tailZipf(ahead)
			var vs [2*maxAhead + 3]uint64
			tails := 0
			for round := range 2000 {
				k := round % len(vs)
				p.drawAll(vs[:k], aheadSrc, aheadTail)
				for j, got := range vs[:k] {
					want := p.draw(one, oneTail)
					if got != want {
						t.Fatalf("round %d, value %d of %d: drew %d ahead, %d one at a time", round, j, k, got, want)
					}
					if want >= uint64(p.tail) {
						tails++
					}
				}
				if a, b := one.Uint64(), ahead.Uint64(); a != b {
					t.Fatalf("round %d: the sources parted (%#x, %#x)", round, a, b)
				}
			}
			if hasTail := p.tail != uint32(len(p.slots)); hasTail != (tails > 0) {
				t.Errorf("%d values drawn from the tail; table has a tail: %v", tails, hasTail)
			}
		})
	}
}
