package ops

import "math/bits"

// philox is the Philox4x32-10 counter-based generator (Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3", SC 2011), laid out as
// TensorFlow's random::PhiloxRandom is: a 128-bit counter of four 32-bit
// words, least significant first, and a 64-bit key of two. Each call of
// next encrypts the counter with the key in ten rounds and then counts it
// up by one: one 128-bit sample is four uint32s. A philox is a value;
// copying it forks the stream, which is how TensorFlow hands each call of
// a kernel, and each group of outputs, a part of its node's stream.
type philox struct {
	ctr [4]uint32
	key [2]uint32
}

// The round constants: the multipliers, and the key schedule's Weyl
// increments (the golden ratio and sqrt(3)-1 in 32-bit fixed point).
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// newPhilox returns the generator TensorFlow seeds from a seed pair: key
// from seed, the counter's high 64 bits from seed2 and its low ones zero.
func newPhilox(seed, seed2 uint64) philox {
	return philox{
		key: [2]uint32{uint32(seed), uint32(seed >> 32)},
		ctr: [4]uint32{0, 0, uint32(seed2), uint32(seed2 >> 32)},
	}
}

// philoxFromKeyCounter returns the generator of the stateless ops' key and
// 128-bit counter (low word first), as they pass them as uint64s.
func philoxFromKeyCounter(key uint64, ctrLo, ctrHi uint64) philox {
	return philox{
		key: [2]uint32{uint32(key), uint32(key >> 32)},
		ctr: [4]uint32{uint32(ctrLo), uint32(ctrLo >> 32), uint32(ctrHi), uint32(ctrHi >> 32)},
	}
}

// next returns the sample at the counter and counts the counter up by one.
// The rounds work on scalars, which the compiler keeps in registers.
func (p *philox) next() [4]uint32 {
	c0, c1, c2, c3 := p.ctr[0], p.ctr[1], p.ctr[2], p.ctr[3]
	k0, k1 := p.key[0], p.key[1]
	for r := 0; ; r++ {
		hi0, lo0 := bits.Mul32(philoxM0, c0)
		hi1, lo1 := bits.Mul32(philoxM1, c2)
		c0, c1, c2, c3 = hi1^c1^k0, lo1, hi0^c3^k1, lo0
		if r == 9 {
			break
		}
		k0 += philoxW0
		k1 += philoxW1
	}
	p.skip(1)
	return [4]uint32{c0, c1, c2, c3}
}

// skip advances the counter by n samples, word by word as TensorFlow
// does: n's low word is added to the counter's first, its high word, plus
// that carry, to the second, whose carry increments the high 64 bits. A
// carry into n's high word that wraps it to zero is lost there too.
func (p *philox) skip(n uint64) {
	lo, hi := uint32(n), uint32(n>>32)
	var c uint32
	p.ctr[0], c = bits.Add32(p.ctr[0], lo, 0)
	hi += c
	p.ctr[1], c = bits.Add32(p.ctr[1], hi, 0)
	if c != 0 {
		p.ctr[2]++
		if p.ctr[2] == 0 {
			p.ctr[3]++
		}
	}
}

// sampler hands out a philox stream one uint32 at a time, as TensorFlow's
// SingleSampleAdapter does for the distributions that reject samples: a
// sample's four words are used in order before the next is drawn.
type sampler struct {
	gen  philox
	buf  [4]uint32
	used int // words of buf handed out; 4 means draw
}

func newSampler(g philox) sampler { return sampler{gen: g, used: 4} }

func (s *sampler) u32() uint32 {
	if s.used == 4 {
		s.buf = s.gen.next()
		s.used = 0
	}
	x := s.buf[s.used]
	s.used++
	return x
}
