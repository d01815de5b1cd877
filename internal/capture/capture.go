// Package capture writes the packet path's frames to one pcap file, for
// starwire's --pcap flag: Ethernet/IPv4/UDP frames that Wireshark and
// gopacket dissect, from AF_XDP links (which capture their own frames) and
// from kernel UDP links (whose datagrams it wraps in the headers the
// kernel would have put around them).
package capture

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/internal/packet"
)

// snapLen is the most of a frame recorded; starwire's frames are smaller.
const snapLen = 65536

// A File is a pcap file several links write to, a whole frame at a time.
// Safe for concurrent use.
type File struct {
	mu    sync.Mutex
	f     *os.File
	w     *pcapgo.Writer
	err   error // the first write error; later frames are dropped
	count int
}

// Create creates path and writes the pcap file header.
func Create(path string) (*File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(snapLen, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("capture: %s: %w", path, err)
	}
	return &File{f: f, w: w}, nil
}

// Frames returns how many frames were written.
func (c *File) Frames() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count
}

// Close closes the file, returning the first error writing it had.
func (c *File) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.f.Close(); c.err == nil && err != nil {
		c.err = fmt.Errorf("capture: %w", err)
	}
	return c.err
}

func (c *File) write(ci gopacket.CaptureInfo, frame []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if err := c.w.WritePacket(ci, frame); err != nil {
		c.err = fmt.Errorf("capture: %w", err)
		return
	}
	c.count++
}

// Stream returns a writer for one AF_XDP link's link.XSKOptions.Pcap: it
// takes the pcap stream the link writes, drops its file header and adds
// each whole record to the file, so that several links share one file.
func (c *File) Stream() io.Writer { return &stream{c: c} }

// stream reassembles records from a pcap stream written in pieces.
type stream struct {
	c      *File
	buf    []byte
	header bool // the file header was seen
	broken bool // a record made no sense: the rest is not read
}

const (
	fileHeaderLen   = 24
	recordHeaderLen = 16
)

func (s *stream) Write(p []byte) (int, error) {
	if s.broken {
		return len(p), nil
	}
	s.buf = append(s.buf, p...)
	if !s.header {
		if len(s.buf) < fileHeaderLen {
			return len(p), nil
		}
		s.buf, s.header = s.buf[fileHeaderLen:], true
	}
	for len(s.buf) >= recordHeaderLen {
		// pcapgo writes records in the host's (little-endian) order.
		sec := binary.LittleEndian.Uint32(s.buf[0:4])
		usec := binary.LittleEndian.Uint32(s.buf[4:8])
		incl := int(binary.LittleEndian.Uint32(s.buf[8:12]))
		orig := int(binary.LittleEndian.Uint32(s.buf[12:16]))
		if incl > snapLen || orig < incl {
			// Not what a link writes: drop the rest of this stream, keep
			// the file good for the others.
			s.buf, s.broken = nil, true
			return len(p), fmt.Errorf("capture: record of %d bytes (of %d) in a pcap stream", incl, orig)
		}
		if len(s.buf) < recordHeaderLen+incl {
			break
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(sec), int64(usec)*1000), CaptureLength: incl, Length: orig}
		s.c.write(ci, s.buf[recordHeaderLen:recordHeaderLen+incl])
		s.buf = s.buf[recordHeaderLen+incl:]
	}
	if len(s.buf) == 0 {
		s.buf = s.buf[:0:0] // let a large backing array go
	}
	return len(p), nil
}

// Link wraps a datagram link (kernel UDP) so that every datagram it sends
// and receives is written to the file as the Ethernet/IPv4/UDP frame the
// kernel carried it in (with zero MAC addresses, which the kernel's
// loopback uses too).
func (c *File) Link(l link.Link) link.Link {
	return &capLink{Link: l, c: c, frame: make([]byte, packet.UDP4HeaderLen+l.MaxPayload())}
}

type capLink struct {
	link.Link
	c     *File
	tx    []byte // the room TxBuffer lent
	frame []byte // scratch for one frame; the link's methods run on one goroutine at a time
	ipID  uint16
}

func (l *capLink) TxBuffer() []byte {
	l.tx = l.Link.TxBuffer()
	return l.tx
}

func (l *capLink) Queue(n int, to netip.AddrPort) {
	l.record(l.tx[:n], l.Link.LocalAddr(), to)
	l.Link.Queue(n, to)
}

func (l *capLink) Receive(pkts []link.Datagram) (int, error) {
	n, err := l.Link.Receive(pkts)
	for _, d := range pkts[:n] {
		l.record(d.Data, d.From, l.Link.LocalAddr())
	}
	return n, err
}

// record writes one datagram as a frame; IPv6 peers are not captured.
func (l *capLink) record(payload []byte, from, to netip.AddrPort) {
	if !from.Addr().Unmap().Is4() || !to.Addr().Unmap().Is4() || len(payload) > len(l.frame)-packet.UDP4HeaderLen {
		return
	}
	l.ipID++
	h := packet.UDP4{SrcIP: from.Addr().Unmap().As4(), DstIP: to.Addr().Unmap().As4(), SrcPort: from.Port(), DstPort: to.Port(), ID: l.ipID}
	copy(l.frame[packet.UDP4HeaderLen:], payload)
	n, err := packet.WriteUDP4(l.frame, &h, len(payload))
	if err != nil {
		return
	}
	l.c.write(gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: n, Length: n}, l.frame[:n])
}
