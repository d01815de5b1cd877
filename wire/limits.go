package wire

import "fmt"

// Limits bound what a decoder accepts, so a hostile or broken peer cannot make
// a receiver allocate without end. The zero value means DefaultLimits.
type Limits struct {
	MaxMeta    uint32 // metadata bytes per frame
	MaxTensors uint16 // tensors per frame
	MaxPayload uint64 // tensor bytes per frame
}

// DefaultLimits are the limits used when none are given.
var DefaultLimits = Limits{
	MaxMeta:    64 << 20,
	MaxTensors: 4096,
	MaxPayload: 4 << 30,
}

// MaxRank is the largest tensor rank accepted, as in TensorFlow.
const MaxRank = 254

func (l *Limits) orDefault() *Limits {
	if l == nil || *l == (Limits{}) {
		return &DefaultLimits
	}
	return l
}

func (l *Limits) check(h *Header) error {
	l = l.orDefault()
	switch {
	case h.MetaLen > l.MaxMeta:
		return fmt.Errorf("metadata of %d bytes over the limit of %d: %w", h.MetaLen, l.MaxMeta, ErrTooLarge)
	case h.Tensors > l.MaxTensors:
		return fmt.Errorf("%d tensors over the limit of %d: %w", h.Tensors, l.MaxTensors, ErrTooLarge)
	case h.PayloadLen > l.MaxPayload:
		return fmt.Errorf("payload of %d bytes over the limit of %d: %w", h.PayloadLen, l.MaxPayload, ErrTooLarge)
	case uint64(h.DescLen) > uint64(h.Tensors)*maxDescSize:
		return fmt.Errorf("descriptors of %d bytes for %d tensors: %w", h.DescLen, h.Tensors, ErrMalformed)
	case h.Tensors > 0 && uint64(h.DescLen) < uint64(h.Tensors)*descFixedSize:
		return fmt.Errorf("descriptors of %d bytes for %d tensors: %w", h.DescLen, h.Tensors, ErrMalformed)
	}
	return nil
}
