package checkpoint

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/starwire/starwire/wire/tfpb"
)

// A Slice selects a block of a tensor: per dimension a start and a length,
// Length -1 meaning the whole dimension (TensorFlow's "-"). A Slice with no
// dimensions selects the whole tensor, whatever its rank.
type Slice struct{ Start, Length []int64 }

// FullLength marks a whole dimension in Slice.Length.
const FullLength = -1

// ParseShapeAndSlice parses one of TensorFlow's shape_and_slices strings,
// "dim0 dim1 ... spec" with spec "start,length" or "-" per dimension
// joined by ':' (e.g. "10 4 0,5:-"). The empty string means the whole
// tensor: full is nil and s has no dimensions.
func ParseShapeAndSlice(spec string) (full []int64, s Slice, err error) {
	if spec == "" {
		return nil, Slice{}, nil
	}
	fields := strings.Fields(spec)
	if len(fields) < 2 {
		return nil, Slice{}, fmt.Errorf("shape_and_slice %q: want dims then a slice: %w", spec, ErrMismatch)
	}
	for _, f := range fields[:len(fields)-1] {
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil || d < 0 {
			return nil, Slice{}, fmt.Errorf("shape_and_slice %q: dimension %q: %w", spec, f, ErrMismatch)
		}
		full = append(full, d)
	}
	s, err = ParseSlice(fields[len(fields)-1])
	if err != nil {
		return nil, Slice{}, fmt.Errorf("shape_and_slice %q: %w", spec, err)
	}
	if len(s.Start) != len(full) {
		return nil, Slice{}, fmt.Errorf("shape_and_slice %q: %d dims, slice of %d: %w", spec, len(full), len(s.Start), ErrMismatch)
	}
	if _, err := s.bounds(full); err != nil {
		return nil, Slice{}, fmt.Errorf("shape_and_slice %q: %w", spec, err)
	}
	return full, s, nil
}

// ParseSlice parses a slice spec as Slice.String formats it ("0,5:-").
func ParseSlice(spec string) (Slice, error) {
	var s Slice
	for _, ext := range strings.Split(spec, ":") {
		if ext == "-" {
			s.Start, s.Length = append(s.Start, 0), append(s.Length, FullLength)
			continue
		}
		a, b, ok := strings.Cut(ext, ",")
		start, err1 := strconv.ParseInt(a, 10, 64)
		length, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || start < 0 || length < 0 {
			return Slice{}, fmt.Errorf("slice %q: extent %q: %w", spec, ext, ErrMismatch)
		}
		s.Start, s.Length = append(s.Start, start), append(s.Length, length)
	}
	return s, nil
}

// String formats s as TensorFlow does: "start,length" or "-" per
// dimension, joined by ':'.
func (s Slice) String() string {
	var b strings.Builder
	for i := range s.Start {
		if i > 0 {
			b.WriteByte(':')
		}
		if s.Length[i] == FullLength {
			b.WriteByte('-')
			continue
		}
		fmt.Fprintf(&b, "%d,%d", s.Start[i], s.Length[i])
	}
	return b.String()
}

// box is a slice resolved against a full shape: concrete starts and lengths.
type box struct{ start, length []int64 }

// bounds resolves s against full, checking it lies within.
func (s Slice) bounds(full []int64) (box, error) {
	if len(s.Start) != len(s.Length) {
		return box{}, fmt.Errorf("slice with %d starts and %d lengths: %w", len(s.Start), len(s.Length), ErrMismatch)
	}
	b := box{start: make([]int64, len(full)), length: make([]int64, len(full))}
	if len(s.Start) == 0 {
		copy(b.length, full)
		return b, nil
	}
	if len(s.Start) != len(full) {
		return box{}, fmt.Errorf("slice %s of a rank-%d tensor: %w", s, len(full), ErrMismatch)
	}
	for i, d := range full {
		st, l := s.Start[i], s.Length[i]
		if l == FullLength {
			if st != 0 {
				return box{}, fmt.Errorf("slice %s: whole dimension %d from %d: %w", s, i, st, ErrMismatch)
			}
			l = d
		}
		if st < 0 || l < 0 || st > d || l > d-st {
			return box{}, fmt.Errorf("slice %s outside shape %v: %w", s, full, ErrMismatch)
		}
		b.start[i], b.length[i] = st, l
	}
	return b, nil
}

func (b box) isFull(full []int64) bool {
	for i, d := range full {
		if b.start[i] != 0 || b.length[i] != d {
			return false
		}
	}
	return true
}

func (b box) volume() int64 {
	n := int64(1)
	for _, l := range b.length {
		n *= l // within a valid shape: cannot overflow
	}
	return n
}

// intersect returns the common part of a and b; ok is false when empty.
func intersect(a, b box) (box, bool) {
	r := box{start: make([]int64, len(a.start)), length: make([]int64, len(a.start))}
	for i := range a.start {
		lo := max(a.start[i], b.start[i])
		hi := min(a.start[i]+a.length[i], b.start[i]+b.length[i])
		if hi <= lo {
			return box{}, false
		}
		r.start[i], r.length[i] = lo, hi-lo
	}
	return r, true
}

// copyBox copies the elements of region (in full-tensor coordinates) from
// a tensor holding box src to one holding box dst, calling move for each
// run of n contiguous elements: from element index si to index di.
func copyBox(region, src, dst box, move func(di, si, n int64)) {
	rank := len(region.start)
	if rank == 0 {
		move(0, 0, 1)
		return
	}
	if region.volume() == 0 {
		return
	}
	idx := make([]int64, rank) // offset within region, innermost runs whole
	last := region.length[rank-1]
	for {
		var si, di int64
		for d := range rank {
			c := region.start[d] + idx[d]
			si = si*src.length[d] + c - src.start[d]
			di = di*dst.length[d] + c - dst.start[d]
		}
		move(di, si, last)
		d := rank - 2
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < region.length[d] {
				break
			}
			idx[d] = 0
		}
		if d < 0 {
			return
		}
	}
}

// toProto converts s as TensorSlice::AsProto does: a whole dimension is an
// extent with neither start nor length.
func (s Slice) toProto() *tfpb.TensorSliceProto {
	p := &tfpb.TensorSliceProto{}
	for i := range s.Start {
		e := &tfpb.TensorSliceProto_Extent{}
		if s.Length[i] != FullLength {
			e.Start = s.Start[i]
			e.HasLength = &tfpb.TensorSliceProto_Extent_Length{Length: s.Length[i]}
		}
		p.Extent = append(p.Extent, e)
	}
	return p
}

func sliceFromProto(p *tfpb.TensorSliceProto) Slice {
	s := Slice{Start: make([]int64, 0, len(p.Extent)), Length: make([]int64, 0, len(p.Extent))}
	for _, e := range p.Extent {
		l, ok := e.HasLength.(*tfpb.TensorSliceProto_Extent_Length)
		if !ok {
			s.Start, s.Length = append(s.Start, 0), append(s.Length, FullLength)
			continue
		}
		s.Start, s.Length = append(s.Start, e.Start), append(s.Length, l.Length)
	}
	return s
}

// canonical returns s as TensorFlow's TensorSlice holds it: a slice with
// no dimensions becomes rank-many whole dimensions; otherwise s is kept as
// given, since TensorFlow keys "0,4" of a 4-long dimension apart from "-"
// (a partitioned variable's spec spells out its unsplit dimensions).
func (s Slice) canonical(full []int64) Slice {
	if len(s.Start) != 0 {
		return Slice{Start: slices.Clone(s.Start), Length: slices.Clone(s.Length)}
	}
	c := Slice{Start: make([]int64, len(full)), Length: make([]int64, len(full))}
	for i := range c.Length {
		c.Length[i] = FullLength
	}
	return c
}

// sliceKey is TensorFlow's EncodeTensorNameSlice: the ordered-code
// encoding of 0, the name, the rank, then each dimension's start and
// length (-1 for a whole dimension). The leading 0 byte keeps slice keys
// apart from tensor names.
func sliceKey(name string, s Slice) string {
	b := appendNumIncreasing(nil, 0)
	b = appendOrderedString(b, name)
	b = appendNumIncreasing(b, uint64(len(s.Start)))
	for i := range s.Start {
		start, length := s.Start[i], s.Length[i]
		if length == FullLength {
			start = 0
		}
		b = appendSignedNumIncreasing(b, start)
		b = appendSignedNumIncreasing(b, length)
	}
	return string(b)
}

// appendNumIncreasing is OrderedCode::WriteNumIncreasing: a length byte,
// then the value big-endian without leading zero bytes.
func appendNumIncreasing(dst []byte, v uint64) []byte {
	n := (bits.Len64(v) + 7) / 8
	dst = append(dst, byte(n))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// appendOrderedString is OrderedCode::WriteString: 0x00 escaped as
// 0x00 0xff, 0xff as 0xff 0x00, terminated by 0x00 0x01.
func appendOrderedString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case 0x00:
			dst = append(dst, 0x00, 0xff)
		case 0xff:
			dst = append(dst, 0xff, 0x00)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, 0x00, 0x01)
}

// appendSignedNumIncreasing is OrderedCode::WriteSignedNumIncreasing: the
// value sign-extended, big-endian, in the fewest bytes that leave room for
// a sign bit and a unary length header (as many bits equal to the sign bit
// as bytes follow the first), the header xored into the leading bytes.
func appendSignedNumIncreasing(dst []byte, v int64) []byte {
	x := uint64(v)
	if v < 0 {
		x = ^x
	}
	if x < 64 {
		return append(dst, byte(0x80^v))
	}
	// n bytes hold 7n-1 value bits besides the sign: kBitsToLength.
	n := bits.Len64(x)/7 + 1
	var buf [10]byte
	if v < 0 {
		buf[0], buf[1] = 0xff, 0xff
	}
	binary.BigEndian.PutUint64(buf[2:], uint64(v))
	hdr := lengthHeader[n]
	out := buf[10-n:]
	out[0] ^= hdr[0]
	out[1] ^= hdr[1]
	return append(dst, out...)
}

// lengthHeader is OrderedCode's kLengthToHeaderBits: the header bits of the
// first two bytes of an n-byte signed number.
var lengthHeader = [11][2]byte{
	{0, 0}, {0x80, 0}, {0xc0, 0}, {0xe0, 0}, {0xf0, 0}, {0xf8, 0},
	{0xfc, 0}, {0xfe, 0}, {0xff, 0}, {0xff, 0x80}, {0xff, 0xc0},
}
