package wire

import "fmt"

// Limits bound what a decoder accepts, so a hostile or broken peer cannot make
// a receiver allocate without end. The zero value means DefaultLimits.
//
// A frame over a size limit is not a broken stream: its header is sound, so a
// stream transport skips its body and delivers it with Inbound.Err wrapping
// ErrTooLarge, and the call fails alone. A header that breaks the format
// (magic, version, kind, descriptor lengths) ends the connection.
type Limits struct {
	MaxMeta    uint32 // metadata bytes per frame
	MaxTensors uint16 // tensors per frame
	MaxPayload uint64 // tensor bytes per frame
}

// DefaultLimits are the limits used when none are given. MaxPayload is
// TensorFlow's largest gRPC message rounded down to a power of two: a larger
// tensor is better split by its variable's partitioner than sent whole.
var DefaultLimits = Limits{
	MaxMeta:    64 << 20,
	MaxTensors: 4096,
	MaxPayload: 1 << 30,
}

// MaxRank is the largest tensor rank accepted, as in TensorFlow.
const MaxRank = 254

func (l *Limits) orDefault() *Limits {
	if l == nil || *l == (Limits{}) {
		return &DefaultLimits
	}
	return l
}

// checkFormat refuses headers whose lengths contradict each other; nothing
// after such a header can be trusted.
func checkFormat(h *Header) error {
	switch {
	case uint64(h.DescLen) > uint64(h.Tensors)*maxDescSize:
		return fmt.Errorf("descriptors of %d bytes for %d tensors: %w", h.DescLen, h.Tensors, ErrMalformed)
	case h.Tensors > 0 && uint64(h.DescLen) < uint64(h.Tensors)*descFixedSize:
		return fmt.Errorf("descriptors of %d bytes for %d tensors: %w", h.DescLen, h.Tensors, ErrMalformed)
	case h.PayloadLen > maxBodyLen:
		return fmt.Errorf("payload of %d bytes: %w", h.PayloadLen, ErrMalformed)
	}
	return nil
}

// maxBodyLen bounds what a reader may have to skip: no tensor is 1 TiB.
const maxBodyLen = 1 << 40

func (l *Limits) check(h *Header) error {
	l = l.orDefault()
	switch {
	case h.MetaLen > l.MaxMeta:
		return fmt.Errorf("metadata of %d bytes over the limit of %d: %w", h.MetaLen, l.MaxMeta, ErrTooLarge)
	case h.Tensors > l.MaxTensors:
		return fmt.Errorf("%d tensors over the limit of %d: %w", h.Tensors, l.MaxTensors, ErrTooLarge)
	case h.PayloadLen > l.MaxPayload:
		return fmt.Errorf("payload of %d bytes over the limit of %d: %w", h.PayloadLen, l.MaxPayload, ErrTooLarge)
	}
	return nil
}
