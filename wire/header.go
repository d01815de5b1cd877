package wire

import (
	"encoding/binary"
	"fmt"
)

// HeaderSize is the size in bytes of every frame's fixed header.
const HeaderSize = 48

// Magic opens every frame ("SW" on the wire); Version is the frame format
// this package speaks. A peer that sends anything else is refused.
const (
	Magic   uint16 = 0x5753
	Version uint8  = 1
)

// Kind says what a frame is for.
type Kind uint8

// Frame kinds.
const (
	KindRequest  Kind = 1 + iota // a call: Method and CallID set
	KindResponse                 // the successful answer to CallID
	KindError                    // a failed answer to CallID: Status set, Meta holds the message
	KindCancel                   // the caller gave up on CallID
	KindHello                    // first frame on a connection: Meta holds the peer's capabilities
	KindPing                     // keepalive probe, answered by KindPong with the same CallID
	KindPong                     // answer to KindPing
	KindGoAway                   // the sender is shutting down and takes no new calls
	kindEnd
)

var kindNames = [...]string{"invalid", "request", "response", "error", "cancel", "hello", "ping", "pong", "goaway"}

func (k Kind) String() string {
	if k < kindEnd {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Header is the fixed part of a frame. On the wire it is HeaderSize bytes,
// little-endian:
//
//	0  magic u16 | 2 version u8 | 3 kind u8 | 4 flags u16 | 6 tensors u16
//	8  method u32 | 12 status i32
//	16 call id u64
//	24 meta length u32 | 28 descriptor length u32
//	32 payload length u64
//	40 timeout u64 (nanoseconds the caller will wait, 0 for no deadline)
//
// The frame's body follows: MetaLen bytes of metadata (protobuf), DescLen
// bytes of tensor descriptors, then PayloadLen bytes of tensor data, the
// tensors back to back in descriptor order.
type Header struct {
	Kind       Kind
	Flags      uint16
	Tensors    uint16 // number of tensor descriptors
	Method     uint32 // method id, see rpc.MethodID
	Status     Code   // OK except on KindError
	CallID     uint64 // chosen by the caller; an id, never a pointer
	MetaLen    uint32
	DescLen    uint32
	PayloadLen uint64
	// Timeout is the caller's remaining time on a request, relative so that
	// peers need no synchronised clocks; 0 means no deadline.
	Timeout uint64
}

// BodyLen is the number of bytes that follow the header.
func (h *Header) BodyLen() uint64 {
	return uint64(h.MetaLen) + uint64(h.DescLen) + h.PayloadLen
}

// AppendHeader appends h's wire form to dst.
func AppendHeader(dst []byte, h *Header) []byte {
	var b [HeaderSize]byte
	binary.LittleEndian.PutUint16(b[0:], Magic)
	b[2] = Version
	b[3] = byte(h.Kind)
	binary.LittleEndian.PutUint16(b[4:], h.Flags)
	binary.LittleEndian.PutUint16(b[6:], h.Tensors)
	binary.LittleEndian.PutUint32(b[8:], h.Method)
	binary.LittleEndian.PutUint32(b[12:], uint32(h.Status))
	binary.LittleEndian.PutUint64(b[16:], h.CallID)
	binary.LittleEndian.PutUint32(b[24:], h.MetaLen)
	binary.LittleEndian.PutUint32(b[28:], h.DescLen)
	binary.LittleEndian.PutUint64(b[32:], h.PayloadLen)
	binary.LittleEndian.PutUint64(b[40:], h.Timeout)
	return append(dst, b[:]...)
}

// ParseHeader decodes the header at the start of b and checks it against
// lim. Errors wrap ErrShort, ErrMagic, ErrVersion, ErrKind, ErrMalformed or
// ErrTooLarge; with ErrTooLarge alone the returned header is sound and its
// BodyLen bytes can be skipped to reach the next frame.
func ParseHeader(b []byte, lim *Limits) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("wire: header of %d bytes: %w", len(b), ErrShort)
	}
	if m := binary.LittleEndian.Uint16(b[0:]); m != Magic {
		return h, fmt.Errorf("wire: magic %#04x: %w", m, ErrMagic)
	}
	if v := b[2]; v != Version {
		return h, fmt.Errorf("wire: version %d: %w", v, ErrVersion)
	}
	h.Kind = Kind(b[3])
	if h.Kind == 0 || h.Kind >= kindEnd {
		return h, fmt.Errorf("wire: %v: %w", h.Kind, ErrKind)
	}
	h.Flags = binary.LittleEndian.Uint16(b[4:])
	h.Tensors = binary.LittleEndian.Uint16(b[6:])
	h.Method = binary.LittleEndian.Uint32(b[8:])
	h.Status = Code(int32(binary.LittleEndian.Uint32(b[12:])))
	h.CallID = binary.LittleEndian.Uint64(b[16:])
	h.MetaLen = binary.LittleEndian.Uint32(b[24:])
	h.DescLen = binary.LittleEndian.Uint32(b[28:])
	h.PayloadLen = binary.LittleEndian.Uint64(b[32:])
	h.Timeout = binary.LittleEndian.Uint64(b[40:])
	if err := checkFormat(&h); err != nil {
		return h, fmt.Errorf("wire: %v frame for call %d: %w", h.Kind, h.CallID, err)
	}
	if err := lim.check(&h); err != nil {
		return h, fmt.Errorf("wire: %v frame for call %d: %w", h.Kind, h.CallID, err)
	}
	return h, nil
}
