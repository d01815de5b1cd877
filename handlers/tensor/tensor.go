package tensor

import (
	"errors"
	"unsafe"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// MaxBytes bounds the tensors a worker creates, so that a hostile or
// mistaken shape fails with ResourceExhausted instead of exhausting memory.
const MaxBytes = 4 << 30

// errBadTensor is wrapped by errors from New.
var errBadTensor = errors.New("bad tensor")

// New returns a tensor of dtype and shape in a fresh pooled buffer, owned by
// the caller (release t.Buf). Its contents are unspecified.
func New(dt wire.DataType, shape []int64) (wire.Tensor, error) {
	n, ok := NumElements(shape)
	if !ok || dt.Size() == 0 {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "new %v tensor of shape %v: %v", dt, shape, errBadTensor)
	}
	if n > MaxBytes/int64(dt.Size()) {
		return wire.Tensor{}, status.Errorf(wire.ResourceExhausted, "new %v tensor of shape %v: over %d bytes", dt, shape, MaxBytes)
	}
	buf := wire.NewBuffer(int(n) * dt.Size())
	return wire.Tensor{DType: dt, Shape: append([]int64(nil), shape...), Data: buf.Bytes(), Buf: buf}, nil
}

// NumElements is the product of shape's dimensions; ok is false for a
// negative dimension or an overflow.
func NumElements(shape []int64) (int64, bool) {
	t := wire.Tensor{Shape: shape}
	return t.NumElements()
}

// Owned returns a tensor of dtype and shape in aligned memory of its own,
// not pooled (Buf is nil): for values that live as long as whatever
// references them, such as a graph's constants.
func Owned(dt wire.DataType, shape []int64, nbytes int) wire.Tensor {
	raw := make([]byte, nbytes+63)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % 64); r != 0 {
		off = 64 - r
	}
	return wire.Tensor{DType: dt, Shape: shape, Data: raw[off : off+nbytes : off+nbytes]}
}

// Copy returns a copy of t in a fresh buffer owned by the caller.
func Copy(t *wire.Tensor) wire.Tensor {
	buf := wire.NewBuffer(len(t.Data))
	copy(buf.Bytes(), t.Data)
	return wire.Tensor{DType: t.DType, Shape: append([]int64(nil), t.Shape...), Dead: t.Dead, Data: buf.Bytes(), Buf: buf}
}

// Ref returns t with one more reference on its Buf.
func Ref(t wire.Tensor) wire.Tensor {
	if t.Buf != nil {
		t.Buf.Ref()
	}
	return t
}

// ReleaseAll drops the references ts hold.
func ReleaseAll(ts []wire.Tensor) {
	for i := range ts {
		ts[i].Buf.Release()
	}
}
