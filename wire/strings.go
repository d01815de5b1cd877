package wire

import (
	"encoding/binary"
	"fmt"
)

// AppendStrings appends elems in DTString's encoding: each element as a
// uvarint length followed by its bytes.
func AppendStrings(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
		dst = append(dst, e...)
	}
	return dst
}

// Strings decodes a DTString tensor's elements into dst (reused), as views
// into t.Data, and checks that their count matches the shape and that they
// fill Data exactly.
func (t *Tensor) Strings(dst [][]byte) ([][]byte, error) {
	if t.DType != DTString {
		return dst, fmt.Errorf("wire: Strings of a %v tensor: %w", t.DType, ErrDType)
	}
	n, ok := t.NumElements()
	if !ok {
		return dst, fmt.Errorf("wire: string tensor shape %v: %w", t.Shape, ErrShape)
	}
	dst = dst[:0]
	b := t.Data
	for i := int64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return dst, fmt.Errorf("wire: string element %d of %d: %w", i, n, ErrMalformed)
		}
		dst = append(dst, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return dst, fmt.Errorf("wire: %d bytes after %d string elements: %w", len(b), n, ErrMalformed)
	}
	return dst, nil
}
