package stress

import (
	"encoding/binary"
	"fmt"
)

// Fill writes the pattern of seed into b: the words of a splitmix64
// sequence, so any byte of any call's data is known from its seed alone and
// two calls' data differ everywhere.
func Fill(b []byte, seed uint64) {
	s := seed
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, splitmix(&s))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], splitmix(&s))
		copy(b, w[:])
	}
}

// Check verifies that b holds the pattern of seed and returns an error
// naming the first byte that differs.
func Check(b []byte, seed uint64) error {
	s := seed
	off := 0
	for ; len(b)-off >= 8; off += 8 {
		if binary.LittleEndian.Uint64(b[off:]) != splitmix(&s) {
			return mismatch(b, seed, off)
		}
	}
	if off < len(b) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], splitmix(&s))
		for i := off; i < len(b); i++ {
			if b[i] != w[i-off] {
				return mismatch(b, seed, i)
			}
		}
	}
	return nil
}

func mismatch(b []byte, seed uint64, near int) error {
	want := make([]byte, min(len(b), near+8))
	Fill(want, seed)
	for i := near; i < len(want); i++ {
		if b[i] != want[i] {
			return fmt.Errorf("stress: byte %d of %d is %#02x, want %#02x (seed %#x): %w", i, len(b), b[i], want[i], seed, ErrCorrupted)
		}
	}
	return fmt.Errorf("stress: bytes near %d of %d differ (seed %#x): %w", near, len(b), seed, ErrCorrupted)
}

func splitmix(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	z := *s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
