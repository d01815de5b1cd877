package changes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/starwire/starwire/handlers/embedding"
)

// ErrCorrupt is wrapped by the errors of a part or manifest that does
// not decode or whose checksum disagrees.
var ErrCorrupt = errors.New("changes: corrupt")

// castagnoli is the CRC-32C table, the checksum of parts and manifests.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// partMagic starts every part; partFormat is its layout's number.
const (
	partMagic  = "SWCHANGE"
	partFormat = 1
	headerSize = len(partMagic) + 4*4 + 2*8
)

// flagFull marks a part holding all of its table's rows.
const flagFull = 1

// A Part is what a version holds for one table: Rows (a snapshot of the
// rows changed, without filtered ids) and the ids Evicted before them,
// or with Full every row of the table and nothing evicted.
type Part struct {
	Full    bool
	Rows    *embedding.Snapshot
	Evicted []int64
}

// AppendPart appends p's encoding to dst: the magic, format, flags,
// dimension, slots, rows and evicted counts, then the rows' ids, counts,
// versions, values and each slot's values, the evicted ids, all little
// endian, and a CRC-32C of everything before it.
func AppendPart(dst []byte, p *Part) []byte {
	s := p.Rows
	start := len(dst)
	dst = append(dst, partMagic...)
	var flags uint32
	if p.Full {
		flags = flagFull
	}
	for _, v := range []uint32{partFormat, flags, uint32(s.Dim), uint32(len(s.Slots))} {
		dst = binary.LittleEndian.AppendUint32(dst, v)
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(s.IDs)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(p.Evicted)))
	for _, xs := range [][]int64{s.IDs, s.Freqs, s.Versions} {
		for _, x := range xs {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(x))
		}
	}
	for _, fs := range append([][]float32{s.Values}, s.Slots...) {
		for _, f := range fs {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(f))
		}
	}
	for _, x := range p.Evicted {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(x))
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// maxDim and maxSlots bound what a part may claim, so that a corrupt
// header cannot make the decoder's arithmetic overflow.
const (
	maxDim   = 1 << 20
	maxSlots = 64
)

// DecodePart decodes a part AppendPart encoded, checking its checksum
// and that its counts agree with its length before it allocates.
func DecodePart(b []byte) (*Part, error) {
	if len(b) < headerSize+4 {
		return nil, fmt.Errorf("changes: a part of %d bytes is shorter than its header: %w", len(b), ErrCorrupt)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("changes: part checksum %08x, its trailer says %08x: %w", got, sum, ErrCorrupt)
	}
	if string(body[:len(partMagic)]) != partMagic {
		return nil, fmt.Errorf("changes: not a part (magic %q): %w", body[:len(partMagic)], ErrCorrupt)
	}
	h := body[len(partMagic):]
	format, flags := binary.LittleEndian.Uint32(h), binary.LittleEndian.Uint32(h[4:])
	dim, slots := binary.LittleEndian.Uint32(h[8:]), binary.LittleEndian.Uint32(h[12:])
	rows, evicted := binary.LittleEndian.Uint64(h[16:]), binary.LittleEndian.Uint64(h[24:])
	switch {
	case format != partFormat:
		return nil, fmt.Errorf("changes: part format %d, want %d: %w", format, partFormat, ErrCorrupt)
	case flags&^flagFull != 0:
		return nil, fmt.Errorf("changes: part flags %#x: %w", flags, ErrCorrupt)
	case dim == 0 || dim > maxDim || slots > maxSlots:
		return nil, fmt.Errorf("changes: a part of rows of %d with %d slots: %w", dim, slots, ErrCorrupt)
	}
	// Every count is checked against the bytes left before it is
	// multiplied, so nothing here overflows.
	left := uint64(len(body) - headerSize)
	perRow := 24 + 4*uint64(dim)*(1+uint64(slots))
	if rows > left/perRow || evicted != (left-rows*perRow)/8 || (left-rows*perRow)%8 != 0 {
		return nil, fmt.Errorf("changes: a part of %d bytes cannot hold %d rows of %d with %d slots and %d evicted ids: %w", len(b), rows, dim, slots, evicted, ErrCorrupt)
	}
	if flags&flagFull != 0 && evicted != 0 {
		return nil, fmt.Errorf("changes: a full part with %d evicted ids: %w", evicted, ErrCorrupt)
	}
	n, d := int(rows), int(dim)
	r := reader{b: body[headerSize:]}
	s := &embedding.Snapshot{Dim: d, IDs: r.int64s(n), Freqs: r.int64s(n), Versions: r.int64s(n), Values: r.float32s(n * d)}
	s.Slots = make([][]float32, slots)
	for k := range s.Slots {
		s.Slots[k] = r.float32s(n * d)
	}
	return &Part{Full: flags&flagFull != 0, Rows: s, Evicted: r.int64s(int(evicted))}, nil
}

// A reader takes little-endian arrays off the front of b, whose length
// its caller checked.
type reader struct{ b []byte }

func (r *reader) int64s(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(r.b[8*i:]))
	}
	r.b = r.b[8*n:]
	return out
}

func (r *reader) float32s(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(r.b[4*i:]))
	}
	r.b = r.b[4*n:]
	return out
}
