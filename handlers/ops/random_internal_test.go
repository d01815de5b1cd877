package ops

import (
	"fmt"
	"math"
	"math/big"
	"testing"
)

// TestPhiloxKnownAnswers checks Philox4x32-10 against the known-answer
// vectors of Random123, the authors' implementation (kat_vectors).
func TestPhiloxKnownAnswers(t *testing.T) {
	for _, tc := range []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{}, [2]uint32{}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{^uint32(0), ^uint32(0), ^uint32(0), ^uint32(0)}, [2]uint32{^uint32(0), ^uint32(0)}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	} {
		p := philox{ctr: tc.ctr, key: tc.key}
		if got := p.next(); got != tc.want {
			t.Errorf("philox(%x, %x) = %x, want %x", tc.ctr, tc.key, got, tc.want)
		}
	}
}

// TestPhiloxSkip checks the counter arithmetic TensorFlow's Skip does,
// including the carry it loses when n's high word wraps.
func TestPhiloxSkip(t *testing.T) {
	for _, tc := range []struct {
		ctr  [4]uint32
		n    uint64
		want [4]uint32
	}{
		{[4]uint32{1, 2, 3, 4}, 5, [4]uint32{6, 2, 3, 4}},
		{[4]uint32{0xffffffff, 0, 0, 0}, 1, [4]uint32{0, 1, 0, 0}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 7}, 1, [4]uint32{0, 0, 0, 8}},
		{[4]uint32{0, 0xffffffff, 9, 0}, 1 << 32, [4]uint32{0, 0, 10, 0}},
		{[4]uint32{1, 0, 0, 0}, math.MaxUint64, [4]uint32{0, 0, 0, 0}}, // TensorFlow's lost carry
	} {
		p := philox{ctr: tc.ctr}
		p.skip(tc.n)
		if p.ctr != tc.want {
			t.Errorf("skip(%x) of %x = %x, want %x", tc.n, tc.ctr, p.ctr, tc.want)
		}
	}
	// next counts up by one, as skip(1) does.
	p := philox{ctr: [4]uint32{0xffffffff, 0xffffffff, 0, 0}}
	p.next()
	if p.ctr != [4]uint32{0, 0, 1, 0} {
		t.Errorf("next left the counter at %x", p.ctr)
	}
}

// halfToFloat32 widens half bits exactly.
func halfToFloat32(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0:
		return sign * float32(math.Ldexp(m, -24))
	case 0x1f:
		if m != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+m/1024, e-15))
}

// TestFloat32ToHalf checks rounding to half: every half is its own
// rounding, and halfway points round to the even neighbour.
func TestFloat32ToHalf(t *testing.T) {
	for h := range 1 << 16 {
		f := halfToFloat32(uint16(h))
		got := float32ToHalf(f)
		if f != f {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x became %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("%v (half %#04x) became %#04x", f, h, got)
		}
	}
	for _, tc := range []struct {
		f    float32
		want uint16
	}{
		{0x1p-25, 0},          // half the smallest subnormal: to even, zero
		{0x3p-25, 2},          // 1.5 subnormal units: to even, 2
		{1 + 0x1p-11, 0x3c00}, // halfway above 1: to even, 1
		{1 + 0x3p-11, 0x3c02}, // halfway above 1+2^-10: to even
		{65519, 0x7bff},       // under the halfway point to 65536
		{65520, 0x7c00},       // halfway: infinity
		{0x1.ffcp-15, 0x0400}, // rounds up to the smallest normal
	} {
		if got := float32ToHalf(tc.f); got != tc.want {
			t.Errorf("float32ToHalf(%v) = %#04x, want %#04x", tc.f, got, tc.want)
		}
	}
}

// TestFloat32ToBfloat16 checks rounding to bfloat16 to nearest, ties to
// even, as Eigen does.
func TestFloat32ToBfloat16(t *testing.T) {
	for _, tc := range []struct {
		bits uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // halfway: to even
		{0x3f818000, 0x3f82}, // halfway: to even, up
		{0x3f808001, 0x3f81}, // above halfway
		{0x7f7fffff, 0x7f80}, // rounds to infinity
		{0xffc00001, 0xffc0}, // NaN: the quiet one, signed
	} {
		if got := float32ToBfloat16(math.Float32frombits(tc.bits)); got != tc.want {
			t.Errorf("float32ToBfloat16(%#08x) = %#04x, want %#04x", tc.bits, got, tc.want)
		}
	}
}

// bigSeries sums Σ sign^k x^(a+kstep)/(a+kstep)! at 300 bits, until the
// terms no longer matter: exp (a=0, step 1), sin (a=1, step 2, sign -1)
// and cos (a=0, step 2, sign -1).
func bigSeries(x float64, a, step int64, alternate bool) *big.Float {
	return bigSeriesOf(new(big.Float).SetFloat64(x), a, step, alternate)
}

func bigSeriesOf(x *big.Float, a, step int64, alternate bool) *big.Float {
	const prec = 300
	bx := new(big.Float).SetPrec(prec).Set(x)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for n := int64(1); n <= a; n++ {
		term.Mul(term, bx).Quo(term, new(big.Float).SetInt64(n))
	}
	sum := new(big.Float).SetPrec(prec)
	for k := int64(0); k < 400; k++ {
		sum.Add(sum, term)
		for n := a + k*step + 1; n <= a+(k+1)*step; n++ {
			term.Mul(term, bx).Quo(term, new(big.Float).SetInt64(n))
		}
		if alternate {
			term.Neg(term)
		}
	}
	return sum
}

// correctlyRounded reports whether got is the float64 nearest exact.
func correctlyRounded(got float64, exact *big.Float) bool {
	d := new(big.Float).Sub(exact, big.NewFloat(got))
	d.Abs(d)
	// The neighbour toward exact is what a half ulp is measured by: at a
	// power of 2 the spacing differs on either side.
	toward := math.Inf(1)
	if exact.Cmp(big.NewFloat(got)) < 0 {
		toward = math.Inf(-1)
	}
	halfUlp := new(big.Float).SetFloat64(math.Abs(math.Nextafter(got, toward) - got))
	halfUlp.Quo(halfUlp, big.NewFloat(2))
	return d.Cmp(halfUlp) <= 0
}

// TestLogSincosCorrectlyRounded checks the float64 transcendentals of the
// Box-Muller transform against 300-bit series: sin and cos directly, log
// through exp (log x = y iff exp of y's rounding interval holds x).
func TestLogSincosCorrectlyRounded(t *testing.T) {
	g := newPhilox(11, 12)
	for i := range 500 {
		s := g.next()
		u := max(uint64ToDouble(s[0], s[1]), 1e-7)
		if i < 3 { // the edges: the clamp, 1/2, just under 1
			u = [3]float64{1e-7, 0.5, math.Nextafter(1, 0)}[i]
		}
		y := logCR(u)
		mid := func(to float64) *big.Float { // halfway from y to its neighbour
			m := new(big.Float).SetPrec(300).SetFloat64(y)
			m.Add(m, new(big.Float).SetFloat64(math.Nextafter(y, to)))
			return m.Quo(m, big.NewFloat(2))
		}
		lo := bigSeriesOf(mid(math.Inf(-1)), 0, 1, false)
		hi := bigSeriesOf(mid(math.Inf(1)), 0, 1, false)
		bu := new(big.Float).SetFloat64(u)
		if lo.Cmp(bu) > 0 || hi.Cmp(bu) < 0 {
			t.Fatalf("logCR(%v) = %v, not log's rounding", u, y)
		}
		v := 2 * math.Pi * uint64ToDouble(s[2], s[3])
		sn, cs := sincosCR(v)
		if !correctlyRounded(sn, bigSeries(v, 1, 2, true)) || !correctlyRounded(cs, bigSeries(v, 0, 2, true)) {
			t.Fatalf("sincosCR(%v) = %v, %v; math.Sincos: %v", v, sn, cs, fmt.Sprint(math.Sincos(v)))
		}
	}
}
