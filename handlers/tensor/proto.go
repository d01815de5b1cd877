package tensor

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// ShapeFromProto returns the dimensions of a fully known shape.
func ShapeFromProto(s *tfpb.TensorShapeProto) ([]int64, error) {
	if s.GetUnknownRank() {
		return nil, fmt.Errorf("tensor: shape of unknown rank")
	}
	dims := make([]int64, len(s.GetDim()))
	for i, d := range s.GetDim() {
		if d.GetSize() < 0 {
			return nil, fmt.Errorf("tensor: shape dimension %d is unknown (%d)", i, d.GetSize())
		}
		dims[i] = d.GetSize()
	}
	return dims, nil
}

// ShapeToProto returns shape as a TensorShapeProto.
func ShapeToProto(shape []int64) *tfpb.TensorShapeProto {
	p := &tfpb.TensorShapeProto{Dim: make([]*tfpb.TensorShapeProto_Dim, len(shape))}
	for i, d := range shape {
		p.Dim[i] = &tfpb.TensorShapeProto_Dim{Size: d}
	}
	return p
}

// FromProto decodes p into a tensor in a fresh aligned buffer, owned by
// the caller (release t.Buf). The elements come from tensor_content when it
// is set, else from the typed repeated field of p's dtype (float_val,
// int_val, int64_val, string_val, ...). As in TensorFlow, fewer typed values
// than elements repeat the last value (a Const of shape [1000] may hold one
// float_val), and none at all means zeros. Errors wrap status.ErrInvalidArgument.
func FromProto(p *tfpb.TensorProto) (wire.Tensor, error) {
	dt := wire.DataType(p.GetDtype())
	shape, err := ShapeFromProto(p.GetTensorShape())
	if err != nil {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %v", err)
	}
	n, ok := NumElements(shape)
	if !ok {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: shape %v has no element count", shape)
	}
	if dt == wire.DTString {
		return stringsFromProto(p, shape, n)
	}
	size := dt.Size()
	if size == 0 {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: dtype %v cannot be held", dt)
	}
	if n > MaxBytes/int64(size) {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %v%v is over %d bytes", dt, shape, MaxBytes)
	}
	nbytes := n * int64(size)
	buf := wire.NewBuffer(int(nbytes))
	t := wire.Tensor{DType: dt, Shape: shape, Data: buf.Bytes(), Buf: buf}
	if c := p.GetTensorContent(); len(c) > 0 || n == 0 {
		if int64(len(c)) != nbytes {
			buf.Release()
			return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %v%v needs %d bytes of content, has %d", dt, shape, nbytes, len(c))
		}
		copy(t.Data, c)
		return t, nil
	}
	if err := fillTyped(&t, p); err != nil {
		buf.Release()
		return wire.Tensor{}, err
	}
	return t, nil
}

// fillTyped copies the typed repeated field matching t's dtype into t,
// broadcasting the last value.
func fillTyped(t *wire.Tensor, p *tfpb.TensorProto) error {
	switch t.DType {
	case wire.DTFloat:
		return broadcast(View[float32](t.Data), p.GetFloatVal(), func(v float32) float32 { return v })
	case wire.DTDouble:
		return broadcast(View[float64](t.Data), p.GetDoubleVal(), func(v float64) float64 { return v })
	case wire.DTInt32, wire.DTQint32:
		return broadcast(View[int32](t.Data), p.GetIntVal(), func(v int32) int32 { return v })
	case wire.DTInt16, wire.DTQint16:
		return broadcast(View[int16](t.Data), p.GetIntVal(), func(v int32) int16 { return int16(v) })
	case wire.DTUint16, wire.DTQuint16:
		return broadcast(View[uint16](t.Data), p.GetIntVal(), func(v int32) uint16 { return uint16(v) })
	case wire.DTInt8, wire.DTQint8:
		return broadcast(View[int8](t.Data), p.GetIntVal(), func(v int32) int8 { return int8(v) })
	case wire.DTUint8, wire.DTQuint8:
		return broadcast(View[uint8](t.Data), p.GetIntVal(), func(v int32) uint8 { return uint8(v) })
	case wire.DTInt64:
		return broadcast(View[int64](t.Data), p.GetInt64Val(), func(v int64) int64 { return v })
	case wire.DTUint32:
		return broadcast(View[uint32](t.Data), p.GetUint32Val(), func(v uint32) uint32 { return v })
	case wire.DTUint64:
		return broadcast(View[uint64](t.Data), p.GetUint64Val(), func(v uint64) uint64 { return v })
	case wire.DTBool:
		return broadcast(View[uint8](t.Data), p.GetBoolVal(), func(v bool) uint8 {
			if v {
				return 1
			}
			return 0
		})
	case wire.DTHalf, wire.DTBfloat16:
		return broadcast(View[uint16](t.Data), p.GetHalfVal(), func(v int32) uint16 { return uint16(v) })
	case wire.DTComplex64:
		return broadcastPairs(View[float32](t.Data), p.GetScomplexVal())
	case wire.DTComplex128:
		return broadcastPairs(View[float64](t.Data), p.GetDcomplexVal())
	}
	return status.Errorf(wire.InvalidArgument, "tensor: no typed values for dtype %v", t.DType)
}

func broadcast[S, D any](dst []D, src []S, conv func(S) D) error {
	if len(src) > len(dst) {
		return status.Errorf(wire.InvalidArgument, "tensor: %d values for %d elements", len(src), len(dst))
	}
	var zero D
	for i := range dst {
		switch {
		case i < len(src):
			dst[i] = conv(src[i])
		case len(src) == 0:
			dst[i] = zero
		default:
			dst[i] = dst[len(src)-1]
		}
	}
	return nil
}

// broadcastPairs is broadcast for complex values stored as (real, imag).
func broadcastPairs[T float32 | float64](dst, src []T) error {
	if len(src)%2 != 0 || len(src) > len(dst) {
		return status.Errorf(wire.InvalidArgument, "tensor: %d complex parts for %d", len(src), len(dst))
	}
	for i := 0; i < len(dst); i += 2 {
		switch {
		case i < len(src):
			dst[i], dst[i+1] = src[i], src[i+1]
		case len(src) == 0:
			dst[i], dst[i+1] = 0, 0
		default:
			dst[i], dst[i+1] = src[len(src)-2], src[len(src)-1]
		}
	}
	return nil
}

// stringsFromProto decodes a DT_STRING TensorProto in either of
// TensorFlow's encodings: string_val (broadcasting the last value, as for
// the typed fields), or tensor_content holding TensorFlow's encoded string
// list (port::EncodeStringList: every element's length as a varint32, then
// the elements' bytes one after another), which is what a TensorFlow
// client's Tensor::AsProtoTensorContent sends.
func stringsFromProto(p *tfpb.TensorProto, shape []int64, n int64) (wire.Tensor, error) {
	if c := p.GetTensorContent(); len(c) > 0 {
		return decodeStringList(c, shape, n)
	}
	vals := p.GetStringVal()
	if int64(len(vals)) > n {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %d strings for %d elements", len(vals), n)
	}
	// Size the buffer before making anything of n's size: one short
	// string_val may claim a shape of billions of elements.
	size := int64(0)
	for _, v := range vals {
		size += int64(uvarintLen(uint64(len(v))) + len(v))
	}
	if rest := n - int64(len(vals)); rest > 0 {
		var last []byte
		if len(vals) > 0 {
			last = vals[len(vals)-1]
		}
		each := int64(uvarintLen(uint64(len(last))) + len(last))
		if rest > (MaxBytes-size)/each {
			return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %d strings of %d bytes are over %d bytes", n, len(last), MaxBytes)
		}
		size += rest * each
	}
	if size > MaxBytes {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: strings of %d bytes are over %d", size, MaxBytes)
	}
	buf := wire.NewBuffer(int(size))
	data := buf.Bytes()[:0]
	for i := int64(0); i < n; i++ {
		var e []byte
		switch {
		case i < int64(len(vals)):
			e = vals[i]
		case len(vals) > 0:
			e = vals[len(vals)-1]
		}
		data = binary.AppendUvarint(data, uint64(len(e)))
		data = append(data, e...)
	}
	return wire.Tensor{DType: wire.DTString, Shape: shape, Data: data, Buf: buf}, nil
}

// decodeStringList decodes TensorFlow's encoded string list of n elements
// into DTString's encoding (each element preceded by its length as a
// uvarint). As TensorFlow's DecodeStringList does, it wants exactly n
// lengths, each a varint32, and exactly their sum of bytes after them.
func decodeStringList(c []byte, shape []int64, n int64) (wire.Tensor, error) {
	// Every length takes at least a byte, which bounds n before anything
	// of n's size is made.
	if n > int64(len(c)) {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: %d strings in %d bytes of tensor_content", n, len(c))
	}
	lens := c
	total := uint64(0)
	for i := int64(0); i < n; i++ {
		l, k := varint32(lens)
		if k <= 0 || k > binary.MaxVarintLen32 || l > math.MaxUint32 {
			return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: tensor_content string length %d of %d is not a varint32", i, n)
		}
		total += l
		lens = lens[k:]
	}
	headers := len(c) - len(lens)
	if total != uint64(len(lens)) {
		return wire.Tensor{}, status.Errorf(wire.InvalidArgument, "tensor: tensor_content has %d bytes of strings after %d lengths summing to %d", len(lens), n, total)
	}
	// The lengths are the same numbers in varints, so DTString's encoding
	// is no longer than TensorFlow's, only interleaved.
	buf := wire.NewBuffer(len(c))
	data := buf.Bytes()[:0]
	bodies := c[headers:]
	lens = c[:headers]
	for range n {
		l, k := varint32(lens)
		lens = lens[k:]
		// Re-encoded, not copied: a length TensorFlow's decoder accepts
		// may be a varint longer than it needs to be, never shorter.
		if l < 0x80 {
			data = append(data, byte(l))
		} else {
			data = binary.AppendUvarint(data, l)
		}
		data = append(data, bodies[:l]...)
		bodies = bodies[l:]
	}
	return wire.Tensor{DType: wire.DTString, Shape: shape, Data: data, Buf: buf}, nil
}

// varint32 is binary.Uvarint with the one-byte lengths of short strings
// decoded inline.
func varint32(b []byte) (uint64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1
	}
	return binary.Uvarint(b)
}

// AppendStringList appends elems in TensorFlow's encoded string list, the
// tensor_content of a DT_STRING TensorProto: every length as a varint32,
// then the bytes.
func AppendStringList(dst []byte, elems [][]byte) []byte {
	for _, e := range elems {
		dst = binary.AppendUvarint(dst, uint64(len(e)))
	}
	for _, e := range elems {
		dst = append(dst, e...)
	}
	return dst
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// ToProto encodes t as a TensorProto: POD types in tensor_content,
// strings in string_val. The proto owns copies of t's bytes.
func ToProto(t *wire.Tensor) (*tfpb.TensorProto, error) {
	p := &tfpb.TensorProto{Dtype: tfpb.DataType(t.DType), TensorShape: ShapeToProto(t.Shape)}
	if t.Dead {
		return p, nil
	}
	if err := t.Check(); err != nil {
		return nil, status.Errorf(wire.InvalidArgument, "tensor: %v", err)
	}
	if t.DType == wire.DTString {
		elems, err := t.Strings(nil)
		if err != nil {
			return nil, status.Errorf(wire.InvalidArgument, "tensor: %v", err)
		}
		p.StringVal = make([][]byte, len(elems))
		for i, e := range elems {
			p.StringVal[i] = append([]byte(nil), e...)
		}
		return p, nil
	}
	p.TensorContent = append([]byte(nil), t.Data...)
	return p, nil
}
