package capture

import (
	"errors"
	"fmt"
	"io"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/packet"
)

// Check reads a capture and dissects every frame with gopacket: each must
// be Ethernet/IPv4/UDP with correct IPv4 and UDP checksums, carrying a
// starwire packet whose header decodes. It returns the frames checked and
// the first problem, naming the frame.
func Check(r io.Reader) (int, error) {
	pr, err := pcapgo.NewReader(r)
	if err != nil {
		return 0, fmt.Errorf("capture: %w", err)
	}
	if pr.LinkType() != layers.LinkTypeEthernet {
		return 0, fmt.Errorf("capture: link type %v, want Ethernet", pr.LinkType())
	}
	n := 0
	for {
		data, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("capture: frame %d: %w", n+1, err)
		}
		n++
		if ci.CaptureLength != ci.Length {
			return n, fmt.Errorf("capture: frame %d truncated to %d of %d bytes", n, ci.CaptureLength, ci.Length)
		}
		if err := checkFrame(data); err != nil {
			return n, fmt.Errorf("capture: frame %d: %w", n, err)
		}
	}
}

func checkFrame(data []byte) error {
	p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
	if e := p.ErrorLayer(); e != nil {
		return fmt.Errorf("dissect: %v", e.Error())
	}
	ip, ok := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		return errors.New("not IPv4")
	}
	udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if !ok {
		return errors.New("not UDP")
	}
	if packet.Checksum(ip.Contents) != 0 {
		return fmt.Errorf("IPv4 header checksum %#04x is wrong", ip.Checksum)
	}
	if udp.Checksum == 0 || !packet.UDP4ChecksumOK(data) {
		return fmt.Errorf("UDP checksum %#04x is wrong", udp.Checksum)
	}
	if _, _, err := protocol.DecodeHeader(udp.Payload); err != nil {
		return fmt.Errorf("%v:%d → %v:%d: %w", ip.SrcIP, udp.SrcPort, ip.DstIP, udp.DstPort, err)
	}
	return nil
}
