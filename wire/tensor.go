package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/starwire/starwire/internal/bufpool"
)

// Buffer is an aligned, pooled, reference-counted byte buffer; received
// tensor bytes land in one. See Tensor for who releases it.
type Buffer = bufpool.Buffer

// NewBuffer returns a 64-byte-aligned pooled buffer of n bytes with one
// reference, owned by the caller.
func NewBuffer(n int) *Buffer { return bufpool.Get(n) }

// A Tensor is a typed, shaped block of bytes. Data holds the elements in
// row-major order (POD types, little-endian as in memory) or, for DTString,
// the elements as uvarint-length-prefixed byte strings (see AppendStrings).
//
// Buf, when not nil, is the reference that keeps Data alive; whoever holds
// the Tensor owns that reference and releases it (Inbound.Release does so for
// tensors still attached to it). A Tensor with a nil Buf points into memory
// its creator owns.
type Tensor struct {
	DType  DataType
	Shape  []int64
	Dead   bool // TensorFlow's is_dead: a dead branch's value, with no data
	Data   []byte
	Buf    *Buffer
	nbytes int // byte length announced by a received descriptor
}

// ByteLen returns the tensor's size in bytes: len(Data), or the announced
// size of a received tensor whose destination is not yet set.
func (t *Tensor) ByteLen() int {
	if t.Data != nil {
		return len(t.Data)
	}
	return t.nbytes
}

// NumElements returns the product of the dimensions; ok is false when a
// dimension is negative or the product overflows an int64.
func (t *Tensor) NumElements() (n int64, ok bool) { return numElements(t.Shape) }

func numElements(shape []int64) (int64, bool) {
	n := uint64(1)
	overflow := false
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			overflow = true // fatal unless a later dimension is zero
			n = 1
			continue
		}
		n = lo
		if n == 0 {
			return 0, true
		}
	}
	if overflow {
		return 0, false
	}
	return int64(n), true
}

// Check verifies that dtype, shape and byte length agree: a POD tensor has
// exactly elements×size bytes; a string tensor has at least one length byte
// per element (Strings checks the elements themselves).
func (t *Tensor) Check() error {
	return checkDesc(t.DType, t.Shape, uint64(t.ByteLen()))
}

func checkDesc(dt DataType, shape []int64, nbytes uint64) error {
	if !dt.valid() {
		return fmt.Errorf("%v: %w", dt, ErrDType)
	}
	if len(shape) > MaxRank {
		return fmt.Errorf("rank %d over %d: %w", len(shape), MaxRank, ErrShape)
	}
	n, ok := numElements(shape)
	if !ok {
		return fmt.Errorf("shape %v has no valid element count: %w", shape, ErrShape)
	}
	if dt == DTString {
		if uint64(n) > nbytes || (n == 0 && nbytes != 0) {
			return fmt.Errorf("%d strings in %d bytes: %w", n, nbytes, ErrShape)
		}
		return nil
	}
	hi, want := bits.Mul64(uint64(n), uint64(dt.Size()))
	if hi != 0 || want != nbytes {
		return fmt.Errorf("%v%v needs %d×%d bytes, has %d: %w", dt, shape, n, dt.Size(), nbytes, ErrShape)
	}
	return nil
}

// Descriptor layout, little-endian: dtype u32 | flags u16 | rank u16 |
// byte length u64 | rank × dim i64.
const (
	descFixedSize = 16
	maxDescSize   = descFixedSize + 8*MaxRank
	flagDead      = 1
)

// DescLen returns the size of t's descriptor on the wire.
func DescLen(t *Tensor) int { return descFixedSize + 8*len(t.Shape) }

// AppendDesc appends t's descriptor to dst after checking that dtype, shape
// and byte length agree.
func AppendDesc(dst []byte, t *Tensor) ([]byte, error) {
	if err := t.Check(); err != nil {
		return dst, fmt.Errorf("wire: tensor: %w", err)
	}
	var flags uint16
	if t.Dead {
		flags |= flagDead
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(t.DType))
	dst = binary.LittleEndian.AppendUint16(dst, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(t.Shape)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(t.ByteLen()))
	for _, d := range t.Shape {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(d))
	}
	return dst, nil
}

// ParseDesc decodes one descriptor from the start of b into t, taking the
// shape's storage from dims (grown when short) and returning what is left of
// b and of dims. t.Data is left nil: the receiver chooses where the bytes go.
func ParseDesc(b []byte, t *Tensor, dims []int64) (rest []byte, restDims []int64, err error) {
	if len(b) < descFixedSize {
		return b, dims, fmt.Errorf("wire: descriptor of %d bytes: %w", len(b), ErrShort)
	}
	dt := DataType(int32(binary.LittleEndian.Uint32(b)))
	flags := binary.LittleEndian.Uint16(b[4:])
	rank := int(binary.LittleEndian.Uint16(b[6:]))
	nbytes := binary.LittleEndian.Uint64(b[8:])
	b = b[descFixedSize:]
	if flags&^flagDead != 0 {
		// Bits this version does not know would be dropped on the way on.
		return b, dims, fmt.Errorf("wire: descriptor flags %#04x: %w", flags, ErrMalformed)
	}
	if rank > MaxRank {
		return b, dims, fmt.Errorf("wire: descriptor rank %d over %d: %w", rank, MaxRank, ErrShape)
	}
	if len(b) < 8*rank {
		return b, dims, fmt.Errorf("wire: descriptor with rank %d in %d bytes: %w", rank, len(b), ErrShort)
	}
	if cap(dims) < rank {
		dims = make([]int64, 0, max(rank, 64))
	}
	shape := dims[:rank:rank]
	for i := range shape {
		shape[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	b = b[8*rank:]
	if err := checkDesc(dt, shape, nbytes); err != nil {
		return b, dims, fmt.Errorf("wire: descriptor: %w", err)
	}
	if nbytes > math.MaxInt {
		return b, dims, fmt.Errorf("wire: descriptor of %d bytes: %w", nbytes, ErrTooLarge)
	}
	*t = Tensor{DType: dt, Shape: shape, Dead: flags&flagDead != 0, nbytes: int(nbytes)}
	return b, dims[rank:rank], nil
}
