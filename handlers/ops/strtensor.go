package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// encodeStringTensor returns a DTString tensor of shape holding elems, in a
// pooled buffer the caller owns. Strings have no fixed size, so
// tensor.New cannot make them: the buffer is sized from the elements.
func encodeStringTensor(shape []int64, elems [][]byte) (wire.Tensor, error) {
	size := 0
	for _, e := range elems {
		size += len(e) + 10 // a uvarint length takes at most 10 bytes
	}
	if size > tensor.MaxBytes {
		return wire.Tensor{}, status.Errorf(wire.ResourceExhausted, "string tensor of shape %v: over %d bytes", shape, tensor.MaxBytes)
	}
	buf := wire.NewBuffer(size)
	data := wire.AppendStrings(buf.Bytes()[:0], elems)
	return wire.Tensor{DType: wire.DTString, Shape: append([]int64(nil), shape...), Data: data, Buf: buf}, nil
}

// stringElems decodes t's elements as views into its data.
func stringElems(t *wire.Tensor) ([][]byte, error) {
	elems, err := t.Strings(nil)
	if err != nil {
		return nil, status.Errorf(wire.InvalidArgument, "%v", err)
	}
	return elems, nil
}
