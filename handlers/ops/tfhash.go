package ops

import "encoding/binary"

// TensorFlow's own hash of a string (tensorflow/core/lib/hash: a 64-bit
// MurmurHash2 with a fixed seed) and of a key of several elements. A
// MutableDenseHashTable's buckets are where these hashes put the keys, and
// its checkpoint is the buckets themselves: a table restored from
// TensorFlow's checkpoint finds its keys, and TensorFlow finds the keys of
// a table this package saved, only if both hash the same.

// tfHashSeed is the seed TensorFlow's Hash64 of a string uses.
const tfHashSeed = 0xDECAFCAFFE

// tfHash64 is TensorFlow's Hash64(data, len(data)).
func tfHash64(data []byte) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := uint64(tfHashSeed) ^ (uint64(len(data)) * m)
	for len(data) >= 8 {
		k := binary.LittleEndian.Uint64(data)
		data = data[8:]
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	if len(data) > 0 {
		// The last bytes, little-endian, as the reference's fallthrough
		// switch mixes them.
		var tail uint64
		for i := len(data) - 1; i >= 0; i-- {
			tail = tail<<8 | uint64(data[i])
		}
		h ^= tail
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// tfHashCombine is TensorFlow's Hash64Combine, which hashes a key of
// several elements from the hashes of its elements.
func tfHashCombine(a, b uint64) uint64 {
	return a ^ (b + 0x9e3779b97f4a7800 + (a << 10) + (a >> 4))
}
