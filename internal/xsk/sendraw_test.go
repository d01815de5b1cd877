package xsk_test

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

func unixSocketPacket() (int, error) {
	return unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
}

func closeFD(fd int) { unix.Close(fd) }

// sendPacket writes a complete Ethernet frame on ifindex.
func sendPacket(fd, ifindex int, frame []byte) error {
	return unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifindex, Protocol: htons(unix.ETH_P_IP), Halen: 6})
}
