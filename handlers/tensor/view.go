package tensor

import (
	"fmt"
	"unsafe"

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
		panic(fmt.Sprintf("tensor: view of misaligned memory as %T", zero))
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

// Aligned reports whether t's data may be viewed as its element type.
func Aligned(t *wire.Tensor) bool {
	size := t.DType.Size()
	if size == 0 || len(t.Data) == 0 {
		return true
	}
	align := min(size, 8)
	return uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%uintptr(align) == 0
}
