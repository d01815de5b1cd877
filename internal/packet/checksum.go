package packet

import (
	"encoding/binary"
	"math/bits"
)

// sum adds b to a running ones'-complement sum as big-endian 16-bit words;
// an odd trailing byte is padded with zero, as RFC 1071 specifies.
//
// The bulk is added as 64-bit little-endian words with end-around carry:
// a ones'-complement sum does not depend on byte order except for a final
// swap of the folded result (RFC 1071, section 2(B)), and wide words cut
// the work per byte fourfold. The tail, fewer than eight bytes, starts at
// an even offset and is added as big-endian words.
func sum(acc uint64, b []byte) uint64 {
	var s, c uint64
	for len(b) >= 32 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:]), c)
		b = b[32:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	s, c = bits.Add64(s, c, 0)
	s += c // cannot carry again: s is at most 2⁶⁴-2 after a carry out
	// Fold to 16 bits of little-endian words, then swap to big-endian.
	s = s&0xffffffff + s>>32
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	acc += uint64(bits.ReverseBytes16(uint16(s)))
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

// fold reduces a running sum to 16 bits and complements it.
func fold(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return ^uint16(acc)
}

// Checksum returns the Internet checksum (RFC 1071) of b.
func Checksum(b []byte) uint16 { return fold(sum(0, b)) }
