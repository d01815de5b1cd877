package packet

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header lengths of the frames this package writes (IPv4 without options).
const (
	EthernetLen = 14
	IPv4Len     = 20
	UDPLen      = 8
	// UDP4HeaderLen is where the UDP payload starts in a written frame.
	UDP4HeaderLen = EthernetLen + IPv4Len + UDPLen
)

const (
	etherTypeIPv4 = 0x0800
	protoUDP      = 17
	defaultTTL    = 64
)

// ErrShort is returned when a frame is too small for its headers or for
// the lengths they declare.
var ErrShort = errors.New("frame too short")

// ErrNotUDP4 is returned by ParseUDP4 for frames that are not IPv4/UDP.
var ErrNotUDP4 = errors.New("not an IPv4/UDP frame")

// UDP4 is the addressing of an Ethernet/IPv4/UDP frame.
type UDP4 struct {
	SrcMAC, DstMAC   [6]byte
	SrcIP, DstIP     [4]byte
	SrcPort, DstPort uint16
	// TTL defaults to 64 when zero.
	TTL uint8
	// ID is the IPv4 identification field.
	ID uint16
}

// WriteUDP4 writes the headers of h into frame[:UDP4HeaderLen] for the
// payload of payloadLen bytes the caller has already placed at
// frame[UDP4HeaderLen:], and computes the IPv4 header and UDP checksums.
// It returns the frame length. It does not allocate.
func WriteUDP4(frame []byte, h *UDP4, payloadLen int) (int, error) {
	total := UDP4HeaderLen + payloadLen
	if payloadLen < 0 || total > len(frame) || IPv4Len+UDPLen+payloadLen > 0xffff {
		return 0, fmt.Errorf("packet: write udp4 with %d-byte payload into %d bytes: %w", payloadLen, len(frame), ErrShort)
	}
	f := frame[:total]
	copy(f[0:6], h.DstMAC[:])
	copy(f[6:12], h.SrcMAC[:])
	binary.BigEndian.PutUint16(f[12:14], etherTypeIPv4)

	ip := f[EthernetLen : EthernetLen+IPv4Len]
	ttl := h.TTL
	if ttl == 0 {
		ttl = defaultTTL
	}
	ip[0] = 0x45 // version 4, IHL 5
	ip[1] = 0
	binary.BigEndian.PutUint16(ip[2:4], uint16(IPv4Len+UDPLen+payloadLen))
	binary.BigEndian.PutUint16(ip[4:6], h.ID)
	binary.BigEndian.PutUint16(ip[6:8], 0x4000) // don't fragment
	ip[8] = ttl
	ip[9] = protoUDP
	ip[10], ip[11] = 0, 0
	copy(ip[12:16], h.SrcIP[:])
	copy(ip[16:20], h.DstIP[:])
	binary.BigEndian.PutUint16(ip[10:12], Checksum(ip))

	udp := f[EthernetLen+IPv4Len:]
	binary.BigEndian.PutUint16(udp[0:2], h.SrcPort)
	binary.BigEndian.PutUint16(udp[2:4], h.DstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(udp)))
	udp[6], udp[7] = 0, 0
	binary.BigEndian.PutUint16(udp[6:8], udpChecksum(ip[12:16], ip[16:20], udp))
	return total, nil
}

// udpChecksum computes the UDP checksum over the IPv4 pseudo-header and
// the UDP header and payload (whose checksum field must be zero). A
// computed zero is sent as 0xffff, since zero means "no checksum".
func udpChecksum(src, dst, udp []byte) uint16 {
	acc := sum(0, src)
	acc = sum(acc, dst)
	acc += protoUDP + uint64(len(udp))
	c := fold(sum(acc, udp))
	if c == 0 {
		c = 0xffff
	}
	return c
}

// ParseUDP4 reads the addressing of an Ethernet/IPv4/UDP frame and returns
// the UDP payload, a view into frame. It honours IPv4 options (IHL) and the
// lengths the headers declare, and verifies the IPv4 header checksum; it
// does not verify the UDP checksum. It does not allocate.
func ParseUDP4(frame []byte) (h UDP4, payload []byte, err error) {
	if len(frame) < EthernetLen+IPv4Len {
		return h, nil, ErrShort
	}
	if binary.BigEndian.Uint16(frame[12:14]) != etherTypeIPv4 {
		return h, nil, ErrNotUDP4
	}
	ip := frame[EthernetLen:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < IPv4Len || ip[9] != protoUDP {
		return h, nil, ErrNotUDP4
	}
	totalLen := int(binary.BigEndian.Uint16(ip[2:4]))
	if totalLen < ihl+UDPLen || totalLen > len(ip) {
		return h, nil, ErrShort
	}
	if Checksum(ip[:ihl]) != 0 {
		return h, nil, ErrNotUDP4
	}
	if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 {
		return h, nil, ErrNotUDP4 // a fragment: its UDP header is elsewhere
	}
	udp := ip[ihl:totalLen]
	udpLen := int(binary.BigEndian.Uint16(udp[4:6]))
	if udpLen < UDPLen || udpLen > len(udp) {
		return h, nil, ErrShort
	}
	copy(h.DstMAC[:], frame[0:6])
	copy(h.SrcMAC[:], frame[6:12])
	copy(h.SrcIP[:], ip[12:16])
	copy(h.DstIP[:], ip[16:20])
	h.TTL = ip[8]
	h.ID = binary.BigEndian.Uint16(ip[4:6])
	h.SrcPort = binary.BigEndian.Uint16(udp[0:2])
	h.DstPort = binary.BigEndian.Uint16(udp[2:4])
	return h, udp[UDPLen:udpLen], nil
}

// SwapUDP4 turns a received Ethernet/IPv4/UDP frame (IPv4 without options)
// into its reply in place: it swaps the MAC addresses, the IPv4 addresses
// and the UDP ports. Both checksums stay valid, because a ones'-complement
// sum does not depend on the order of its words. It reports false, leaving
// frame untouched, when frame is too short or not IPv4/UDP without options.
func SwapUDP4(frame []byte) bool {
	if len(frame) < UDP4HeaderLen || binary.BigEndian.Uint16(frame[12:14]) != etherTypeIPv4 ||
		frame[EthernetLen] != 0x45 || frame[EthernetLen+9] != protoUDP {
		return false
	}
	var t [6]byte
	copy(t[:], frame[0:6])
	copy(frame[0:6], frame[6:12])
	copy(frame[6:12], t[:])
	ip := frame[EthernetLen:]
	copy(t[:4], ip[12:16])
	copy(ip[12:16], ip[16:20])
	copy(ip[16:20], t[:4])
	udp := ip[IPv4Len:]
	copy(t[:2], udp[0:2])
	copy(udp[0:2], udp[2:4])
	copy(udp[2:4], t[:2])
	return true
}

// UDP4ChecksumOK verifies the UDP checksum of an Ethernet/IPv4/UDP frame
// (a zero checksum, "none", passes). Frames a kernel socket sent over veth
// may fail it: with checksum offload the sender leaves only the
// pseudo-header sum in place, for hardware that veth does not have.
func UDP4ChecksumOK(frame []byte) bool {
	if _, _, err := ParseUDP4(frame); err != nil {
		return false
	}
	ip := frame[EthernetLen:]
	ihl := int(ip[0]&0x0f) * 4
	udp := ip[ihl:]
	udp = udp[:binary.BigEndian.Uint16(udp[4:6])]
	if binary.BigEndian.Uint16(udp[6:8]) == 0 {
		return true
	}
	acc := sum(0, ip[12:20])
	acc += protoUDP + uint64(len(udp))
	return fold(sum(acc, udp)) == 0
}
