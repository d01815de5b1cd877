package handlers

import (
	"fmt"
	"unsafe"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// Elem is an element type a tensor's bytes can be viewed as.
type Elem interface {
	~float32 | ~float64 | ~int32 | ~int64 | ~uint8 | ~int8 | ~int16 | ~uint16 | ~uint32 | ~uint64
}

// View returns b's memory as a []T without copying. b must be aligned for T,
// which every wire buffer is (64 bytes); View panics otherwise, since a
// misaligned view is a bug in whoever made b. Trailing bytes that do not fill
// a whole element are left out.
func View[T Elem](b []byte) []T {
	var zero T
	size := int(unsafe.Sizeof(zero))
	if len(b) < size {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%unsafe.Alignof(zero) != 0 {
		panic(fmt.Sprintf("handlers: view of misaligned memory as %T", zero))
	}
	return unsafe.Slice((*T)(p), len(b)/size)
}

// Bytes returns s's memory as bytes without copying.
func Bytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}

// aligned reports whether t's data may be viewed as its element type.
func aligned(t *wire.Tensor) bool {
	size := t.DType.Size()
	if size == 0 || len(t.Data) == 0 {
		return true
	}
	align := min(size, 8)
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%uintptr(align) == 0
}

// MaxTensorBytes bounds the tensors a worker creates, so that a hostile or
// mistaken shape fails with ResourceExhausted instead of exhausting memory.
const MaxTensorBytes = 4 << 30

// NewTensor returns a tensor of dtype and shape in a fresh pooled buffer,
// owned by the caller (release t.Buf). Its contents are unspecified.
func NewTensor(dt wire.DataType, shape []int64) (wire.Tensor, error) {
	n, ok := numElements(shape)
	if !ok || dt.Size() == 0 {
		return wire.Tensor{}, rpc.Errorf(wire.InvalidArgument, "new %v tensor of shape %v: %v", dt, shape, errBadTensor)
	}
	if n > MaxTensorBytes/int64(dt.Size()) {
		return wire.Tensor{}, rpc.Errorf(wire.ResourceExhausted, "new %v tensor of shape %v: over %d bytes", dt, shape, MaxTensorBytes)
	}
	buf := wire.NewBuffer(int(n) * dt.Size())
	return wire.Tensor{DType: dt, Shape: append([]int64(nil), shape...), Data: buf.Bytes(), Buf: buf}, nil
}

// numElements is the product of shape's dimensions; ok is false for a
// negative dimension or an overflow.
func numElements(shape []int64) (int64, bool) {
	t := wire.Tensor{Shape: shape}
	return t.NumElements()
}

// ownedTensor returns a tensor of dtype and shape in aligned memory of its
// own, not pooled (Buf is nil): for values that live as long as whatever
// references them, such as a graph's constants.
func ownedTensor(dt wire.DataType, shape []int64, nbytes int) wire.Tensor {
	raw := make([]byte, nbytes+63)
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))) % 64); r != 0 {
		off = 64 - r
	}
	return wire.Tensor{DType: dt, Shape: shape, Data: raw[off : off+nbytes : off+nbytes]}
}
