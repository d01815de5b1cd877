package packet

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// referenceSum is RFC 1071 word by word.
func referenceSum(acc uint64, b []byte) uint64 {
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

func TestSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 9100)
	for trial := range 2000 {
		n := rng.IntN(len(b))
		fill := byte(0)
		switch trial % 3 {
		case 0:
			fill = 0xff // every word all ones: the carries pile up
		case 1:
			fill = 0
		}
		for i := range b[:n] {
			if trial%3 == 2 {
				b[i] = byte(rng.Uint32())
			} else {
				b[i] = fill
			}
		}
		acc := rng.Uint64N(1 << 40)
		if got, want := fold(sum(acc, b[:n])), fold(referenceSum(acc, b[:n])); got != want {
			t.Fatalf("trial %d, %d bytes: checksum %#04x, want %#04x", trial, n, got, want)
		}
	}
}

func FuzzSum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff}, uint64(0))
	f.Add(make([]byte, 77), uint64(1<<33))
	f.Fuzz(func(t *testing.T, b []byte, acc uint64) {
		acc >>= 16 // a running sum of a few kilobytes of words
		if got, want := fold(sum(acc, b)), fold(referenceSum(acc, b)); got != want {
			t.Fatalf("checksum %#04x, want %#04x", got, want)
		}
	})
}

func BenchmarkChecksum1432(b *testing.B) {
	buf := make([]byte, 1432)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		Checksum(buf)
	}
}
