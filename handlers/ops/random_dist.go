package ops

import "math"

// How TensorFlow's CPU kernels turn Philox samples into values
// (random_distributions.h), one function per step so that each can be
// checked on its own:
//
//   - uniform floats take a sample word's low mantissa bits under the
//     exponent of 1 and subtract 1: float32 uses 23 bits of one word,
//     float64 20 bits of one word and 32 of the next, half 10 and
//     bfloat16 7 bits of a word;
//   - normals are Box-Muller pairs: two words make two float32s (half and
//     bfloat16 round those), four words make two float64s;
//   - truncated normals draw Box-Muller pairs word by word and keep the
//     values under 2 in magnitude, in order.
//
// The transcendentals are where normals can differ from TensorFlow's:
// its kernels call the C library (glibc's logf and sincosf for float32,
// log and sincos for float64). Here each is computed correctly rounded
// (float32 ones in float64 and rounded once, float64 ones in double-double,
// random_dd.go), so results differ only where the C library misrounds:
// glibc's float64 functions rarely do, but its float32 ones are documented
// to err up to 0.82 ulp (logf) and 0.56 ulp (sincosf) and misround 0.7%
// and 1.3% of the inputs here. Matching those bit for bit would mean their
// algorithms and tables; the difference is bounded instead, and
// TensorFlow's own float32 normals change with the C library it runs on.
// Random_test.go measures how often the results differ, and by how much.

// uint32ToFloat is a uniform float32 in [0, 1) from x's low 23 bits.
func uint32ToFloat(x uint32) float32 {
	return math.Float32frombits(127<<23|x&0x7fffff) - 1
}

// uint64ToDouble is a uniform float64 in [0, 1) from x0's low 20 bits
// (the mantissa's high ones) and x1.
func uint64ToDouble(x0, x1 uint32) float64 {
	man := uint64(x0&0xfffff)<<32 | uint64(x1)
	return math.Float64frombits(1023<<52|man) - 1
}

// uint16ToHalf is a uniform half in [0, 1), as bits, from x's low 10
// bits: m/1024, exact in half.
func uint16ToHalf(x uint32) uint16 { return float32ToHalf(float32(x&0x3ff) / 1024) }

// uint16ToBfloat16 is a uniform bfloat16 in [0, 1), as bits, from x's low
// 7 bits: m/128, exact in bfloat16.
func uint16ToBfloat16(x uint32) uint16 { return float32ToBfloat16(float32(x&0x7f) / 128) }

// boxMullerFloat maps two words to two standard normal float32s in the
// order and precision TensorFlow's BoxMullerFloat uses: the radius from
// float32 log and sqrt of u1 (kept above 1e-7 so that log stays finite),
// the angle rounded to float32 from 2π (a float64) times u2, and sine and
// cosine of that float32 angle.
func boxMullerFloat(x0, x1 uint32) (float32, float32) {
	u1 := uint32ToFloat(x0)
	if u1 < 1e-7 {
		u1 = 1e-7
	}
	v := float32(2 * math.Pi * float64(uint32ToFloat(x1)))
	r := sqrt32(-2 * log32(u1))
	s, c := sincos32(v)
	return s * r, c * r
}

// boxMullerDouble maps four words to two standard normal float64s as
// TensorFlow's BoxMullerDouble does, with correctly rounded log, sine and
// cosine.
func boxMullerDouble(x0, x1, x2, x3 uint32) (float64, float64) {
	u1 := uint64ToDouble(x0, x1)
	if u1 < 1e-7 {
		u1 = 1e-7
	}
	v := 2 * math.Pi * uint64ToDouble(x2, x3)
	r := math.Sqrt(-2 * logCR(u1))
	s, c := sincosCR(v)
	return s * r, c * r
}

// log32 is the natural logarithm of a positive float32, correctly rounded
// but for ties closer than float64 can tell.
func log32(x float32) float32 { return float32(math.Log(float64(x))) }

// sqrt32 is the square root of a float32, correctly rounded: float64 holds
// more than twice float32's bits, so rounding twice cannot err.
func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// sincos32 is the sine and cosine of a float32, each rounded once from
// float64.
func sincos32(x float32) (float32, float32) {
	s, c := math.Sincos(float64(x))
	return float32(s), float32(c)
}

// float32ToHalf rounds f to the nearest IEEE half (ties to even), as bits:
// what Eigen::half's conversion does, subnormals, overflow to infinity and
// NaNs included.
func float32ToHalf(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN: keep it quiet and non-zero
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // rounds past 65504
		return sign | 0x7c00
	case abs < 0x38800000: // below half's smallest normal, 2^-14
		// Scale so that the subnormal's units are float32 integers, and
		// let float32 addition round to even.
		m := math.Float32frombits(abs) + 0.5
		return sign | uint16(math.Float32bits(m)-math.Float32bits(0.5))
	}
	// Rebias the exponent (127 to 15) and round the 13 dropped bits.
	odd := (abs >> 13) & 1
	abs += 0xc8000fff + odd // (15-127)<<23, plus the rounding bias
	return sign | uint16(abs>>13)
}

// float32ToBfloat16 rounds f to the nearest bfloat16 (ties to even), as
// bits, as Eigen's bfloat16 conversion does; NaN becomes the quiet NaN.
func float32ToBfloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16)&0x8000 | 0x7fc0
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
