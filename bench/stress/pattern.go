package stress

import (
	"encoding/binary"
	"fmt"
)

// Fill writes the pattern of seed into b: word i is a mix of seed and i, so
// any byte of any call's data is known from its seed alone, a byte out of
// place does not match, and two calls' data differ everywhere. It is cheap
// (a multiply-free step a word) because the harness fills and checks
// gigabytes on the machine it measures.
func Fill(b []byte, seed uint64) {
	s := start(seed)
	for len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, next(&s))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], next(&s))
		copy(b, w[:])
	}
}

// Check verifies that b holds the pattern of seed and returns an error
// naming the first byte that differs.
func Check(b []byte, seed uint64) error {
	s := start(seed)
	off := 0
	for ; len(b)-off >= 8; off += 8 {
		if binary.LittleEndian.Uint64(b[off:]) != next(&s) {
			return mismatch(b, seed, off)
		}
	}
	if off < len(b) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], next(&s))
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

// start scrambles seed, so that nearby seeds give unrelated patterns.
func start(seed uint64) uint64 {
	z := seed + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// next steps a Weyl sequence and folds its high bits down.
func next(s *uint64) uint64 {
	*s += 0x9e3779b97f4a7c15
	return *s ^ *s>>29
}
