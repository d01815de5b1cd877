package protocol

import (
	"encoding/binary"
	"fmt"

	"github.com/starwire/starwire/wire"
)

// Packing. Small frames queued together (the requests of callers in
// flight at once, the answers an inline handler sends in one reactor loop)
// share a packet, flagged FlagPacked, each after its length. On a copy-mode
// link the kernel's work is per packet, about a microsecond each way, which
// was half the CPU of a call with 32 in flight; packed, a batch of calls
// costs it a few packets. A frame travelling alone is sent as before, so a
// sequential call pays nothing for it.
//
// A packet is packed at the time its messages are taken for sending and
// never changes afterwards: a message joins the last packet assigned only
// while that packet has not been transmitted, so a retransmission carries
// the same frames again.

// packedLenBytes is the length that goes before each frame in a packed
// packet.
const packedLenBytes = 2

// packedLen is what a frame of total bytes takes in a packed packet.
func packedLen(total uint64) int { return packedLenBytes + int(total) }

// MaxPacked is the most frames a packed packet of dataLen bytes can hold.
func MaxPacked(dataLen int) int { return dataLen/(packedLenBytes+wire.HeaderSize) + 1 }

// join puts om, just numbered, in the packet last assigned if it fits there
// and that packet has not left yet. It reports whether om joined.
func (s *Session) join(om *outMsg) bool {
	n := packedLen(om.total)
	if s.packLen == 0 || om.npk != 1 || s.packLen+n > s.dataLen || seqLess(s.assign-1, s.maxSent) {
		return false
	}
	om.first, om.member = s.assign-1, true
	s.packLen += n
	return true
}

// writePacked writes into dst the frames of the packet whose first message
// is at out index idx, and returns the bytes written.
func (s *Session) writePacked(dst []byte, idx int) int {
	seq, w := s.out.at(idx).first, 0
	for j := idx; j < s.out.len(); j++ {
		om := s.out.at(j)
		if om.first != seq || (j > idx && !om.member) {
			break
		}
		binary.LittleEndian.PutUint16(dst[w:], uint16(om.total))
		w += packedLenBytes
		copyFrame(dst[w:w+int(om.total)], om, 0)
		w += int(om.total)
	}
	return w
}

// acceptPacked lands and delivers the frames of a packed packet, the next in
// order. Like accept, it reports false, taking nothing, when the frames
// cannot all be delivered yet.
func (s *Session) acceptPacked(h *PacketHeader, data []byte) (bool, error) {
	n, err := countPacked(data)
	if err != nil {
		return false, fmt.Errorf("afxdp: session %#x from %v: packet %d: %w", s.key.ID, s.key.Peer, h.Seq, err)
	}
	if !s.up.Room(n) || (s.adm != nil && !s.adm.Admit(0)) {
		return false, nil
	}
	// The frames' heads announce less than the packet holds (feed
	// checks each announces exactly its bytes), so the packet's length
	// pays for them all, and what is left over is given back.
	if !s.reserve(int64(len(data))) {
		return false, nil
	}
	s.rx.claim += int64(len(data))
	for i := uint32(0); len(data) > 0; i++ {
		fh, frame := packedFrame(h, i, &data)
		in, err := s.rx.feed(&fh, frame, s, false)
		if err != nil {
			return false, fmt.Errorf("afxdp: session %#x from %v: %w", s.key.ID, s.key.Peer, err)
		}
		s.framed = true
		s.up.Deliver(in)
	}
	s.Release(s.rx.claim)
	s.rx.claim = 0
	s.expect++
	return true, nil
}

// packedFrame returns the header and data of frame i of packed packet h,
// which starts *rest, and moves *rest past it. countPacked checked the
// framing.
func packedFrame(h *PacketHeader, i uint32, rest *[]byte) (PacketHeader, []byte) {
	data := *rest
	l := int(binary.LittleEndian.Uint16(data))
	*rest = data[packedLenBytes+l:]
	return PacketHeader{Type: TypeData, Flags: FlagFirst | FlagLast, Length: uint16(l), Session: h.Session, Seq: h.Seq, Msg: h.Msg + i},
		data[packedLenBytes : packedLenBytes+l]
}

// countPacked checks the framing of a packed packet's data and returns how
// many frames it holds.
func countPacked(data []byte) (int, error) {
	n := 0
	for len(data) > 0 {
		if len(data) < packedLenBytes {
			return 0, fmt.Errorf("packed frame length cut short: %w", ErrProtocol)
		}
		l := int(binary.LittleEndian.Uint16(data))
		if l == 0 || packedLenBytes+l > len(data) {
			return 0, fmt.Errorf("packed frame of %d bytes in %d: %w", l, len(data)-packedLenBytes, ErrProtocol)
		}
		data = data[packedLenBytes+l:]
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("packed packet without frames: %w", ErrProtocol)
	}
	return n, nil
}
