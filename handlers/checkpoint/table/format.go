package table

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// ErrCorrupt is wrapped by every error about a table's bytes.
var ErrCorrupt = errors.New("table: corrupt")

// Sizes and constants of the LevelDB table format.
const (
	// FooterLen is the size of the footer at the end of every table.
	FooterLen = 48
	// Magic ends every table, stored little-endian.
	Magic = 0xdb4775248b80fb57

	trailerLen        = 5 // compression type + masked crc32c
	maxHandleLen      = 20
	defaultBlockSize  = 256 << 10 // TensorFlow's table::Options
	defaultRestarts   = 16
	noCompression     = 0
	snappyCompression = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// MaskCRC is LevelDB's and TensorFlow's masked crc32c, stored wherever a
// crc may itself be checksummed later.
func MaskCRC(c uint32) uint32 { return (c>>15 | c<<17) + 0xa282ead8 }

// UnmaskCRC inverts MaskCRC.
func UnmaskCRC(m uint32) uint32 {
	r := m - 0xa282ead8
	return r>>17 | r<<15
}

// CRC32C returns the (unmasked) Castagnoli checksum of b.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// ExtendCRC32C continues a Castagnoli checksum with b.
func ExtendCRC32C(c uint32, b []byte) uint32 { return crc32.Update(c, castagnoli, b) }

// handle locates a block: its offset and size, trailer excluded.
type handle struct{ offset, size uint64 }

func (h handle) append(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, h.offset)
	return binary.AppendUvarint(dst, h.size)
}

func parseHandle(b []byte) (handle, []byte, bool) {
	off, n := binary.Uvarint(b)
	if n <= 0 {
		return handle{}, b, false
	}
	size, m := binary.Uvarint(b[n:])
	if m <= 0 {
		return handle{}, b, false
	}
	return handle{off, size}, b[n+m:], true
}

// shortestSeparator returns a short key k with start <= k < limit, as
// LevelDB's bytewise comparator does, so index blocks stay small. start
// is reused.
func shortestSeparator(start, limit []byte) []byte {
	n := min(len(start), len(limit))
	i := 0
	for i < n && start[i] == limit[i] {
		i++
	}
	if i >= n {
		return start // one is a prefix of the other
	}
	if c := start[i]; c < 0xff && c+1 < limit[i] {
		start[i]++
		return start[:i+1]
	}
	return start
}

// shortSuccessor returns a short key k >= key; key is reused.
func shortSuccessor(key []byte) []byte {
	for i, c := range key {
		if c != 0xff {
			key[i] = c + 1
			return key[:i+1]
		}
	}
	return key
}
