package ops

import (
	"math"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// How TensorFlow's FillPhiloxRandom lays a distribution's values out over
// a generator's stream, so that the values do not depend on how its
// threads share the work:
//
//   - a distribution that uses a fixed number of words per value makes a
//     group of values (4 per sample, 2 for 64-bit types) from each sample
//     in turn; the last group is cut short;
//   - one that rejects words (the truncated normal) starts group i at
//     sample i × (group size × 256 / 4) and draws from there word by word
//     (a group that uses more than its 256 words a value, which it almost
//     never does, reads on into the next group's, as in TensorFlow).
//
// The kernels reserve 256 samples per output value from their node's
// generator each call (TensorFlow's ReserveRandomOutputs multiplier),
// which is how a node's next call continues where its last left off.

// reservedSamplesPerOutput is TensorFlow's kReservedSamplesPerOutput, the
// samples reserved per output value in a call and the words a rejecting
// distribution may use per value of a group.
const reservedSamplesPerOutput = 256

// maxTruncatedPairs bounds the Box-Muller pairs one group of truncated
// normals may draw. Each value is kept with probability 0.95, so reaching
// it means the generator is broken; TensorFlow's loop has no bound.
const maxTruncatedPairs = 1 << 16

// A randomFill fills a tensor's memory with values from g.
type randomFill func(g philox, data []byte) error

// fillFixed fills out with groups of n values, f making each group from
// the next sample of g.
func fillFixed[T any](g philox, out []T, n int, f func([4]uint32) [4]T) {
	for len(out) >= n {
		v := f(g.next())
		copy(out, v[:n])
		out = out[n:]
	}
	if len(out) > 0 {
		v := f(g.next())
		copy(out, v[:len(out)])
	}
}

// fillRejecting fills out with groups of n values, f drawing each group
// word by word from its own part of g's stream.
func fillRejecting[T any](g philox, out []T, n int, f func(philox, []T) error) error {
	per := uint64(n * reservedSamplesPerOutput / 4)
	for i := 0; len(out) > 0; i++ {
		gi := g
		gi.skip(uint64(i) * per)
		k := min(n, len(out))
		if err := f(gi, out[:k]); err != nil {
			return err
		}
		out = out[k:]
	}
	return nil
}

// uniformFills, normalFills and truncatedFills are the float kernels'
// code by dtype.
var (
	uniformFills = randomFloatTable(
		func(g philox, b []byte) error { fillFixed(g, tensor.View[float32](b), 4, uniformFloat); return nil },
		func(g philox, b []byte) error { fillFixed(g, tensor.View[float64](b), 2, uniformDouble); return nil },
		func(g philox, b []byte) error { fillFixed(g, tensor.View[uint16](b), 4, uniformHalf); return nil },
		func(g philox, b []byte) error { fillFixed(g, tensor.View[uint16](b), 4, uniformBfloat16); return nil },
	)
	normalFills = randomFloatTable(
		func(g philox, b []byte) error { fillFixed(g, tensor.View[float32](b), 4, normalFloat); return nil },
		func(g philox, b []byte) error { fillFixed(g, tensor.View[float64](b), 2, normalDouble); return nil },
		func(g philox, b []byte) error {
			fillFixed(g, tensor.View[uint16](b), 4, func(s [4]uint32) [4]uint16 { return narrow(normalFloat(s), float32ToHalf) })
			return nil
		},
		func(g philox, b []byte) error {
			fillFixed(g, tensor.View[uint16](b), 4, func(s [4]uint32) [4]uint16 { return narrow(normalFloat(s), float32ToBfloat16) })
			return nil
		},
	)
	truncatedFills = randomFloatTable(
		func(g philox, b []byte) error { return fillRejecting(g, tensor.View[float32](b), 4, truncatedF32) },
		func(g philox, b []byte) error { return fillRejecting(g, tensor.View[float64](b), 2, truncatedDouble) },
		func(g philox, b []byte) error { return fillRejecting(g, tensor.View[uint16](b), 4, truncatedHalf) },
		func(g philox, b []byte) error { return fillRejecting(g, tensor.View[uint16](b), 4, truncatedBfloat16) },
	)
	// Made once: a closure made per call would be allocated per call.
	truncatedF32      = truncatedFloat(identity32)
	truncatedHalf     = truncatedFloat(float32ToHalf)
	truncatedBfloat16 = truncatedFloat(float32ToBfloat16)
)

// randomFloatTypes are the float types TensorFlow's random kernels make.
var randomFloatTypes = []wire.DataType{wire.DTFloat, wire.DTDouble, wire.DTHalf, wire.DTBfloat16}

func randomFloatTable(f32, f64, half, bf16 randomFill) byDType[randomFill] {
	return byDType[randomFill]{types: randomFloatTypes, funcs: []randomFill{f32, f64, half, bf16}}
}

func uniformFloat(s [4]uint32) [4]float32 {
	return [4]float32{uint32ToFloat(s[0]), uint32ToFloat(s[1]), uint32ToFloat(s[2]), uint32ToFloat(s[3])}
}

func uniformDouble(s [4]uint32) [4]float64 {
	return [4]float64{uint64ToDouble(s[0], s[1]), uint64ToDouble(s[2], s[3])}
}

func uniformHalf(s [4]uint32) [4]uint16 {
	return [4]uint16{uint16ToHalf(s[0]), uint16ToHalf(s[1]), uint16ToHalf(s[2]), uint16ToHalf(s[3])}
}

func uniformBfloat16(s [4]uint32) [4]uint16 {
	return [4]uint16{uint16ToBfloat16(s[0]), uint16ToBfloat16(s[1]), uint16ToBfloat16(s[2]), uint16ToBfloat16(s[3])}
}

func normalFloat(s [4]uint32) [4]float32 {
	var v [4]float32
	v[0], v[1] = boxMullerFloat(s[0], s[1])
	v[2], v[3] = boxMullerFloat(s[2], s[3])
	return v
}

func normalDouble(s [4]uint32) [4]float64 {
	var v [4]float64
	v[0], v[1] = boxMullerDouble(s[0], s[1], s[2], s[3])
	return v
}

// narrow rounds a group of float32s to a 16-bit type.
func narrow(v [4]float32, to func(float32) uint16) [4]uint16 {
	return [4]uint16{to(v[0]), to(v[1]), to(v[2]), to(v[3])}
}

func identity32(f float32) float32 { return f }

// errTruncatedDraws is what a truncated normal group answers when it used
// up maxTruncatedPairs.
var errTruncatedDraws = status.Errorf(wire.Internal, "truncated normal: no value within 2 deviations in %d draws", maxTruncatedPairs)

// truncatedFloat returns the group code of TensorFlow's float32, half and
// bfloat16 truncated normal: Box-Muller float32 pairs, each value kept
// when under 2 in magnitude (before it is rounded to T).
func truncatedFloat[T any](to func(float32) T) func(philox, []T) error {
	return func(g philox, dst []T) error {
		s := newSampler(g)
		k := 0
		for range maxTruncatedPairs {
			x0 := s.u32()
			x1 := s.u32()
			f0, f1 := boxMullerFloat(x0, x1)
			for _, f := range [2]float32{f0, f1} {
				if abs32(f) < 2 {
					dst[k] = to(f)
					if k++; k == len(dst) {
						return nil
					}
				}
			}
		}
		return errTruncatedDraws
	}
}

// truncatedDouble is truncatedFloat for float64: four words a pair.
func truncatedDouble(g philox, dst []float64) error {
	s := newSampler(g)
	k := 0
	for range maxTruncatedPairs {
		x0 := s.u32()
		x1 := s.u32()
		x2 := s.u32()
		x3 := s.u32()
		d0, d1 := boxMullerDouble(x0, x1, x2, x3)
		for _, d := range [2]float64{d0, d1} {
			if math.Abs(d) < 2 {
				dst[k] = d
				if k++; k == len(dst) {
					return nil
				}
			}
		}
	}
	return errTruncatedDraws
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// uniformIntFill fills an int32 or int64 tensor with TensorFlow's uniform
// integers in [lo, hi): a word (int32) or two (int64, low first) modulo
// the range, added to lo. It is biased for ranges that are not powers of
// two, as TensorFlow's is.
func uniformIntFill(dt wire.DataType, g philox, b []byte, lo, hi int64) {
	if dt == wire.DTInt32 {
		rng := uint32(hi) - uint32(lo)
		fillFixed(g, tensor.View[int32](b), 4, func(s [4]uint32) [4]int32 {
			return [4]int32{int32(uint32(lo) + s[0]%rng), int32(uint32(lo) + s[1]%rng), int32(uint32(lo) + s[2]%rng), int32(uint32(lo) + s[3]%rng)}
		})
		return
	}
	rng := uint64(hi) - uint64(lo)
	fillFixed(g, tensor.View[int64](b), 2, func(s [4]uint32) [4]int64 {
		return [4]int64{int64(uint64(lo) + (uint64(s[0])|uint64(s[1])<<32)%rng), int64(uint64(lo) + (uint64(s[2])|uint64(s[3])<<32)%rng)}
	})
}
