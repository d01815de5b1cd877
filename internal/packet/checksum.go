package packet

import "encoding/binary"

// sum adds b to a running ones'-complement sum as big-endian 16-bit words;
// an odd trailing byte is padded with zero, as RFC 1071 specifies.
func sum(acc uint64, b []byte) uint64 {
	for len(b) >= 8 {
		acc += uint64(binary.BigEndian.Uint32(b)) + uint64(binary.BigEndian.Uint32(b[4:]))
		b = b[8:]
	}
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
