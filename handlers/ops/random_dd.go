package ops

import (
	"math"
	"math/big"
)

// Correctly rounded log, sine and cosine for the float64 Box-Muller
// transform. TensorFlow's float64 normals call glibc's log and sincos,
// which round correctly on nearly every input; Go's math.Log and
// math.Sincos are within an ulp but round the other way on 7% and 25% of
// the inputs here, which left a third of float64 normals an ulp or two
// from TensorFlow's. These evaluate in double-double arithmetic (a value
// is an unevaluated sum hi + lo of two float64s, about 106 bits) and round
// once, so they differ from glibc only where glibc itself misrounds.
//
// Go may fuse x*y + z into one rounding on some architectures; the
// error-free transformations below depend on each operation rounding on
// its own, which the explicit float64 conversions enforce.

// dd is a double-double, normalized so that |lo| ≤ ulp(hi)/2.
type dd struct{ hi, lo float64 }

// twoSum is a + b exactly.
func twoSum(a, b float64) dd {
	s := float64(a + b)
	bb := float64(s - a)
	return dd{s, float64(a-float64(s-bb)) + float64(b-bb)}
}

// fastTwoSum is a + b exactly, for |a| ≥ |b|.
func fastTwoSum(a, b float64) dd {
	s := float64(a + b)
	return dd{s, float64(b - float64(s-a))}
}

// twoProd is a × b exactly.
func twoProd(a, b float64) dd {
	p := float64(a * b)
	return dd{p, math.FMA(a, b, -p)}
}

func (x dd) add(y dd) dd {
	s := twoSum(x.hi, y.hi)
	t := twoSum(x.lo, y.lo)
	s = fastTwoSum(s.hi, s.lo+t.hi)
	return fastTwoSum(s.hi, s.lo+t.lo)
}

func (x dd) neg() dd { return dd{-x.hi, -x.lo} }

func (x dd) mul(y dd) dd {
	p := twoProd(x.hi, y.hi)
	return fastTwoSum(p.hi, p.lo+(float64(x.hi*y.lo)+float64(x.lo*y.hi)))
}

func (x dd) mulF(f float64) dd {
	p := twoProd(x.hi, f)
	return fastTwoSum(p.hi, p.lo+float64(x.lo*f))
}

// div is x / y by long division: three float64 quotient digits.
func (x dd) div(y dd) dd {
	q1 := x.hi / y.hi
	r := x.add(y.mulF(q1).neg())
	q2 := r.hi / y.hi
	r = r.add(y.mulF(q2).neg())
	q3 := r.hi / y.hi
	return fastTwoSum(q1, q2).add(dd{q3, 0})
}

// ddOf rounds a big.Float to a double-double.
func ddOf(x *big.Float) dd {
	hi, _ := x.Float64()
	lo, _ := new(big.Float).Sub(x, big.NewFloat(hi)).Float64()
	return dd{hi, lo}
}

// The constants, computed once to 200 bits rather than copied: π/2 in
// three float64 parts (the third for the reduction's last bits), ln 2,
// and the series' coefficients.
var (
	halfPi      [3]float64
	ln2         dd
	sinCoeffs   [14]dd // (-1)^k / (2k+1)!
	cosCoeffs   [15]dd // (-1)^k / (2k)!
	atanhCoeffs [23]dd // 1 / (2k+1)
	invSqrt2    = 1 / math.Sqrt2
)

func init() {
	const prec = 200
	nf := func(x int64) *big.Float { return new(big.Float).SetPrec(prec).SetInt64(x) }
	// atanhInv(x) is atanh(1/x) and atanInv(x) atan(1/x), by their series.
	series := func(x int64, alternate bool) *big.Float {
		sum, term := nf(0), new(big.Float).SetPrec(prec).Quo(nf(1), nf(x))
		x2 := nf(x * x)
		for k := int64(0); k < 200; k++ {
			t := new(big.Float).SetPrec(prec).Quo(term, nf(2*k+1))
			if alternate && k%2 == 1 {
				t.Neg(t)
			}
			sum.Add(sum, t)
			term.Quo(term, x2)
		}
		return sum
	}
	// Machin: π/4 = 4 atan(1/5) - atan(1/239).
	pi := new(big.Float).SetPrec(prec).Sub(new(big.Float).Mul(nf(16), series(5, true)), new(big.Float).Mul(nf(4), series(239, true)))
	rest := new(big.Float).SetPrec(prec).Quo(pi, nf(2))
	for i := range halfPi {
		halfPi[i], _ = rest.Float64()
		rest.Sub(rest, big.NewFloat(halfPi[i]))
	}
	ln2 = ddOf(new(big.Float).SetPrec(prec).Mul(nf(2), series(3, false)))
	fact := nf(1)
	for n := int64(0); n < 2*int64(len(cosCoeffs)); n++ {
		if n > 0 {
			fact.Mul(fact, nf(n))
		}
		c := new(big.Float).SetPrec(prec).Quo(nf(1), fact)
		if (n/2)%2 == 1 {
			c.Neg(c)
		}
		if n%2 == 0 {
			cosCoeffs[n/2] = ddOf(c)
		} else if n/2 < int64(len(sinCoeffs)) {
			sinCoeffs[n/2] = ddOf(c)
		}
	}
	for k := range atanhCoeffs {
		atanhCoeffs[k] = ddOf(new(big.Float).SetPrec(prec).Quo(nf(1), nf(int64(2*k+1))))
	}
}

// horner evaluates Σ c[k] s^k for |s| small, the terms from c[float:] on
// in float64: callers pick float so that those terms sum to less than
// 2^-53, whose float64 error is then below the double-double's.
func horner(c []dd, s dd, float int) dd {
	t := 0.0
	for k := len(c) - 1; k >= float; k-- {
		t = float64(t*s.hi) + c[k].hi
	}
	p := dd{t, 0}
	for k := float - 1; k >= 0; k-- {
		p = p.mul(s).add(c[k])
	}
	return p
}

// logCR is log(x) for a positive normal x, correctly rounded but on
// inputs within 2^-100 of a halfway point: with x = 2^e m, m in [√½, √2),
// log x = e ln 2 + 2 atanh((m-1)/(m+1)).
func logCR(x float64) float64 {
	m, e := math.Frexp(x)
	if m < invSqrt2 {
		m *= 2
		e--
	}
	f := dd{m - 1, 0}.div(twoSum(m, 1))       // m-1 is exact: m is within a factor 2 of 1
	p := horner(atanhCoeffs[:], f.mul(f), 11) // s^11 < 2^-55 for s ≤ 0.03
	r := ln2.mulF(float64(e)).add(f.mul(p).mulF(2))
	return r.hi
}

// sincosCR is sin(x) and cos(x) for 0 ≤ x < 8, each correctly rounded
// but on inputs within 2^-100 of a halfway point: x less j π/2 (in
// double-double), then Taylor series on |r| ≤ π/4, then the quadrant.
func sincosCR(x float64) (float64, float64) {
	j := math.RoundToEven(x / halfPi[0])
	// x - j·halfPi[0] is exact: both are multiples of x's ulp or finer,
	// and the difference, under 1, fits a float64.
	r := dd{math.FMA(-j, halfPi[0], x), 0}
	r = r.add(twoProd(j, halfPi[1]).neg()).add(dd{-float64(j * halfPi[2]), 0})
	r2 := r.mul(r)
	s := horner(sinCoeffs[:], r2, 8).mul(r).hi // (π/4)^16 / 17! < 2^-53
	c := horner(cosCoeffs[:], r2, 9).hi        // (π/4)^18 / 18! < 2^-58
	switch int(j) & 3 {
	case 1:
		return c, -s
	case 2:
		return -s, -c
	case 3:
		return -c, s
	}
	return s, c
}
