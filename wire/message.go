package wire

import (
	"fmt"
	"math"
)

// A Message is a frame on its way out: a header, protobuf metadata and
// tensors whose bytes are sent straight from their own memory.
//
// The sender keeps Meta and every tensor's Data unchanged from Send until the
// transport calls Done (a stream transport: once the bytes are written; a
// packet transport: once every packet is acknowledged).
type Message struct {
	Header  Header
	Meta    []byte
	Tensors []Tensor
	Done    Completion // may be nil
}

// A Completion learns that a transport is finished with a Message: err is nil
// when it was sent, or says why it was not. Implementations must not block.
type Completion interface {
	Sent(m *Message, err error)
}

// Complete calls m.Done, if any.
func (m *Message) Complete(err error) {
	if m.Done != nil {
		m.Done.Sent(m, err)
	}
}

// AppendHead fills in m.Header's length fields from Meta and Tensors and
// appends the frame's head (header, metadata, tensor descriptors) to dst. The
// tensors' data, PayloadLen bytes in all, follows the head on the wire.
func AppendHead(dst []byte, m *Message) ([]byte, error) {
	h := &m.Header
	if len(m.Meta) > math.MaxUint32 {
		return dst, fmt.Errorf("wire: metadata of %d bytes: %w", len(m.Meta), ErrTooLarge)
	}
	if len(m.Tensors) > math.MaxUint16 {
		return dst, fmt.Errorf("wire: %d tensors: %w", len(m.Tensors), ErrTooLarge)
	}
	h.MetaLen = uint32(len(m.Meta))
	h.Tensors = uint16(len(m.Tensors))
	h.DescLen, h.PayloadLen = 0, 0
	for i := range m.Tensors {
		h.DescLen += uint32(DescLen(&m.Tensors[i]))
		h.PayloadLen += uint64(m.Tensors[i].ByteLen())
	}
	start := len(dst)
	dst = AppendHeader(dst, h)
	dst = append(dst, m.Meta...)
	for i := range m.Tensors {
		var err error
		if dst, err = AppendDesc(dst, &m.Tensors[i]); err != nil {
			return dst[:start], fmt.Errorf("wire: tensor %d: %w", i, err)
		}
	}
	return dst, nil
}
