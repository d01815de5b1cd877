package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The packet header every datagram of the protocol starts with, 48 bytes,
// little-endian like package wire:
//
//	0  magic u16 ("XS") | 2 version u8 | 3 type u8
//	4  flags u8 | 5 transmission u8 (DATA: how many times this packet was
//	   sent before, saturating; 0 otherwise) | 6 data length u16
//	8  session id u64
//	16 packet number u32 (DATA: its place in the session's stream)
//	20 message number u32 (DATA: which frame of the stream it belongs to)
//	24 ack u32 (every packet: the next packet number the sender expects)
//	28 window u32 (every packet: how many packets from ack it accepts)
//	32 offset u64 (DATA: where the data starts in its frame; ACK: the echo
//	   of the last data packet to arrive resent or filling a gap, its
//	   number in the low 32 bits and its transmission byte in the next 8,
//	   with bit 40 set, or
//	   with FlagSize the sender's datagram size; OPEN: the sender's
//	   datagram size)
//	40 token u64 (every packet: the session's token for its sender's
//	   direction, which the receiver checks, auth.go; a RESET may echo the
//	   token of the packet it answers)
//
// Every packet carries an acknowledgement, so replies piggyback acks. The
// data, Length bytes, follows the header. An ACK flagged FlagSack carries
// data too: a bitmap of the packets its sender holds past the gap at ack,
// bit i (least significant first, byte by byte) standing for packet
// ack+1+i. An ACK flagged FlagDsack reports, in its message number field,
// a packet its sender received twice, so the peer learns its
// retransmission was not needed; one flagged FlagProbe asks for an ACK at
// once. A DATA packet flagged FlagPacked holds several whole frames,
// numbered from Msg on, each after its length (u16): small calls in flight
// together share a packet, and its cost in the kernel. An OPEN carries,
// as its data, the OpenAuthLen bytes that authenticate it (auth.go), or
// nothing when its dialer runs unauthenticated.
const (
	HeaderLen     = 48
	packetMagic   = 0x5358 // "XS" on the wire
	packetVersion = 3
)

// PacketType says what a packet does.
type PacketType uint8

// Packet types.
const (
	TypeData  PacketType = 1 + iota // a piece of a frame
	TypeAck                         // acknowledgement and credit only
	TypeOpen                        // the dialer asks for a session
	TypeClose                       // the sender closed the session
	TypeReset                       // the sender knows no such session
	typeEnd
)

var typeNames = [...]string{"invalid", "data", "ack", "open", "close", "reset"}

// String names the type as logs and tests print it.
func (t PacketType) String() string {
	if t < typeEnd {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Packet flags.
const (
	FlagFirst  uint8 = 1 << iota // DATA: the first packet of a frame
	FlagLast                     // DATA: the last packet of a frame
	FlagGap                      // any: the sender holds packets past a gap at ack
	FlagSize                     // ACK: Offset is the sender's datagram size (answering OPEN)
	FlagSack                     // ACK: the data is a bitmap of the packets held past ack
	FlagPacked                   // DATA: whole small frames, each after its u16 length (with First and Last)
	FlagDsack                    // ACK: Msg is a packet number the sender received twice
	FlagProbe                    // ACK: the receiver answers at once (keepalive, a shut window's probe)
	flagsKnown = FlagFirst | FlagLast | FlagGap | FlagSize | FlagSack | FlagPacked | FlagDsack | FlagProbe
	ackOnly    = FlagSize | FlagSack | FlagDsack | FlagProbe
)

// Errors of DecodeHeader.
var (
	// ErrShortPacket is wrapped when a datagram is shorter than its header
	// or than the data length it announces.
	ErrShortPacket = errors.New("short packet")
	// ErrNotOurs is wrapped when a datagram does not start with the
	// protocol's magic and version.
	ErrNotOurs = errors.New("not a starwire packet")
	// ErrBadPacket is wrapped for an unknown type or flags, or fields that
	// contradict each other.
	ErrBadPacket = errors.New("malformed packet")
)

// PacketHeader is the decoded packet header.
type PacketHeader struct {
	Type    PacketType
	Flags   uint8
	Tx      uint8  // DATA: how many times this packet was sent before
	Length  uint16 // data bytes after the header
	Session uint64
	Seq     uint32
	Msg     uint32
	Ack     uint32
	Window  uint32
	Offset  uint64
	Token   uint64 // the session's token for the sender's direction
}

// PutHeader writes h into b[:HeaderLen]; b must be at least that long.
func PutHeader(b []byte, h *PacketHeader) {
	_ = b[HeaderLen-1]
	binary.LittleEndian.PutUint16(b[0:], packetMagic)
	b[2] = packetVersion
	b[3] = byte(h.Type)
	b[4] = h.Flags
	b[5] = h.Tx
	binary.LittleEndian.PutUint16(b[6:], h.Length)
	binary.LittleEndian.PutUint64(b[8:], h.Session)
	binary.LittleEndian.PutUint32(b[16:], h.Seq)
	binary.LittleEndian.PutUint32(b[20:], h.Msg)
	binary.LittleEndian.PutUint32(b[24:], h.Ack)
	binary.LittleEndian.PutUint32(b[28:], h.Window)
	binary.LittleEndian.PutUint64(b[32:], h.Offset)
	binary.LittleEndian.PutUint64(b[40:], h.Token)
}

// DecodeHeader decodes the header at the start of b and returns it with the
// packet's data, a view into b. It does not allocate.
func DecodeHeader(b []byte) (PacketHeader, []byte, error) {
	var h PacketHeader
	if len(b) < HeaderLen {
		return h, nil, fmt.Errorf("afxdp: packet of %d bytes: %w", len(b), ErrShortPacket)
	}
	if binary.LittleEndian.Uint16(b[0:]) != packetMagic || b[2] != packetVersion {
		return h, nil, ErrNotOurs
	}
	h.Type = PacketType(b[3])
	h.Flags = b[4]
	h.Tx = b[5]
	h.Length = binary.LittleEndian.Uint16(b[6:])
	h.Session = binary.LittleEndian.Uint64(b[8:])
	h.Seq = binary.LittleEndian.Uint32(b[16:])
	h.Msg = binary.LittleEndian.Uint32(b[20:])
	h.Ack = binary.LittleEndian.Uint32(b[24:])
	h.Window = binary.LittleEndian.Uint32(b[28:])
	h.Offset = binary.LittleEndian.Uint64(b[32:])
	h.Token = binary.LittleEndian.Uint64(b[40:])
	if h.Type == 0 || h.Type >= typeEnd || h.Flags&^flagsKnown != 0 || (h.Tx != 0 && h.Type != TypeData) {
		return h, nil, fmt.Errorf("afxdp: %v packet with flags %#x: %w", h.Type, h.Flags, ErrBadPacket)
	}
	// Besides DATA, only a SACK's bitmap and an OPEN's authentication
	// are data.
	carries := h.Flags&FlagSack != 0 || (h.Type == TypeOpen && h.Length == OpenAuthLen)
	if h.Type != TypeData && (h.Flags&(FlagFirst|FlagLast) != 0 || (h.Length != 0) != carries) {
		return h, nil, fmt.Errorf("afxdp: %v packet with %d data bytes and flags %#x: %w", h.Type, h.Length, h.Flags, ErrBadPacket)
	}
	if h.Type != TypeAck && h.Flags&ackOnly != 0 {
		return h, nil, fmt.Errorf("afxdp: %v packet with flags %#x: %w", h.Type, h.Flags, ErrBadPacket)
	}
	if h.Flags&FlagPacked != 0 && (h.Type != TypeData || h.Flags&(FlagFirst|FlagLast) != FlagFirst|FlagLast) {
		return h, nil, fmt.Errorf("afxdp: %v packet packed with flags %#x: %w", h.Type, h.Flags, ErrBadPacket)
	}
	if h.Type == TypeData && h.Flags&FlagFirst != 0 && h.Offset != 0 {
		return h, nil, fmt.Errorf("afxdp: first packet at offset %d: %w", h.Offset, ErrBadPacket)
	}
	end := HeaderLen + int(h.Length)
	if len(b) < end {
		return h, nil, fmt.Errorf("afxdp: %v packet of %d bytes announces %d: %w", h.Type, len(b), end, ErrShortPacket)
	}
	return h, b[HeaderLen:end], nil
}

// An ACK's echo (in Offset): the number and transmission byte of the last
// data packet that arrived resent or filled a gap, so that the sender knows
// which of its copies of a resent packet got there (as TCP's timestamps
// tell).
const echoValid = 1 << 40

func echoOf(seq uint32, tx uint8) uint64 { return echoValid | uint64(tx)<<32 | uint64(seq) }

// echoed returns what an ACK's Offset echoes, if anything.
func echoed(off uint64) (seq uint32, tx uint8, ok bool) {
	return uint32(off), uint8(off >> 32), off&echoValid != 0
}

// seqLess reports whether packet number a comes before b, modulo 2³².
func seqLess(a, b uint32) bool { return int32(a-b) < 0 }
