package packet

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// reference builds the same frame with gopacket, as an independent encoder.
func reference(t testing.TB, h *UDP4, payload []byte) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(h.SrcMAC[:]), DstMAC: net.HardwareAddr(h.DstMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: h.ID, Flags: layers.IPv4DontFragment, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP(h.SrcIP[:]), DstIP: net.IP(h.DstIP[:])}
	udp := &layers.UDP{SrcPort: layers.UDPPort(h.SrcPort), DstPort: layers.UDPPort(h.DstPort)}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, ip, udp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

var testHeader = UDP4{
	SrcMAC: [6]byte{0x02, 0, 0, 0, 0, 1}, DstMAC: [6]byte{0x02, 0, 0, 0, 0, 2},
	SrcIP: [4]byte{198, 18, 7, 1}, DstIP: [4]byte{198, 18, 7, 2},
	SrcPort: 40000, DstPort: 7470, ID: 0x1234,
}

func TestWriteUDP4MatchesGopacket(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 22, 64, 1000, 1458} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*7 + n)
		}
		frame := make([]byte, 2048)
		copy(frame[UDP4HeaderLen:], payload)
		l, err := WriteUDP4(frame, &testHeader, n)
		if err != nil {
			t.Fatalf("payload %d: %v", n, err)
		}
		// gopacket pads to the 60-byte Ethernet minimum; the NIC does that for us.
		want := reference(t, &testHeader, payload)
		if len(want) < l || !bytes.Equal(frame[:l], want[:l]) {
			t.Fatalf("payload %d: frame differs from gopacket's\n got %x\nwant %x", n, frame[:l], want)
		}
		// gopacket decoding of our bytes sees the same fields.
		p := gopacket.NewPacket(frame[:l], layers.LayerTypeEthernet, gopacket.Default)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if udp == nil || uint16(udp.DstPort) != testHeader.DstPort || !bytes.Equal(udp.Payload, payload) {
			t.Fatalf("payload %d: gopacket decodes %v", n, p)
		}
	}
}

func TestParseUDP4RoundTrip(t *testing.T) {
	frame := make([]byte, 256)
	copy(frame[UDP4HeaderLen:], "hello")
	l, err := WriteUDP4(frame, &testHeader, 5)
	if err != nil {
		t.Fatal(err)
	}
	h, payload, err := ParseUDP4(frame[:l])
	if err != nil {
		t.Fatal(err)
	}
	want := testHeader
	want.TTL = 64
	if h != want || string(payload) != "hello" {
		t.Fatalf("parsed %+v %q", h, payload)
	}
}

func TestParseUDP4WithOptions(t *testing.T) {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 9, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2},
		Options: []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload("xyz")); err != nil {
		t.Fatal(err)
	}
	h, payload, err := ParseUDP4(buf.Bytes())
	if err != nil || h.DstPort != 2 || string(payload) != "xyz" {
		t.Fatalf("got %+v %q %v", h, payload, err)
	}
}

func TestParseUDP4Rejects(t *testing.T) {
	good := make([]byte, 128)
	l, _ := WriteUDP4(good, &testHeader, 10)
	good = good[:l]
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrShort},
		{"truncated ip", good[:20], ErrShort},
		{"truncated udp", good[:UDP4HeaderLen-2], ErrShort},
		{"arp", mut(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }), ErrNotUDP4},
		{"tcp", mut(func(b []byte) []byte { b[EthernetLen+9] = 6; return b }), ErrNotUDP4},
		{"bad ip checksum", mut(func(b []byte) []byte { b[EthernetLen+10] ^= 1; return b }), ErrNotUDP4},
		{"udp length beyond ip", mut(func(b []byte) []byte { b[EthernetLen+IPv4Len+4] = 0xff; return b }), ErrShort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ParseUDP4(tt.frame); !errors.Is(err, tt.want) {
				t.Fatalf("err %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSwapUDP4KeepsChecksums(t *testing.T) {
	frame := make([]byte, 128)
	copy(frame[UDP4HeaderLen:], "ping")
	l, _ := WriteUDP4(frame, &testHeader, 4)
	if !SwapUDP4(frame[:l]) {
		t.Fatal("swap refused")
	}
	rev := UDP4{SrcMAC: testHeader.DstMAC, DstMAC: testHeader.SrcMAC, SrcIP: testHeader.DstIP, DstIP: testHeader.SrcIP,
		SrcPort: testHeader.DstPort, DstPort: testHeader.SrcPort, ID: testHeader.ID}
	if want := reference(t, &rev, []byte("ping")); len(want) < l || !bytes.Equal(frame[:l], want[:l]) {
		t.Fatalf("swapped frame\n got %x\nwant %x", frame[:l], want)
	}
}

func TestUDP4ChecksumOK(t *testing.T) {
	for _, n := range []int{0, 1, 22, 999} {
		frame := make([]byte, UDP4HeaderLen+n)
		for i := range n {
			frame[UDP4HeaderLen+i] = byte(i * 13)
		}
		if _, err := WriteUDP4(frame, &testHeader, n); err != nil {
			t.Fatal(err)
		}
		if !UDP4ChecksumOK(frame) {
			t.Fatalf("payload %d: own checksum rejected", n)
		}
		if !SwapUDP4(frame) || !UDP4ChecksumOK(frame) {
			t.Fatalf("payload %d: checksum rejected after swap", n)
		}
		frame[len(frame)-1-n/2] ^= 0x40
		if n > 0 && UDP4ChecksumOK(frame) {
			t.Fatalf("payload %d: corrupted frame accepted", n)
		}
	}
}

func TestWriteUDP4ShortFrame(t *testing.T) {
	if _, err := WriteUDP4(make([]byte, 50), &testHeader, 10); !errors.Is(err, ErrShort) {
		t.Fatalf("err %v", err)
	}
}

func TestWriteParseAllocateNothing(t *testing.T) {
	frame := make([]byte, 2048)
	allocs := testing.AllocsPerRun(100, func() {
		l, _ := WriteUDP4(frame, &testHeader, 64)
		_, _, _ = ParseUDP4(frame[:l])
		SwapUDP4(frame[:l])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run", allocs)
	}
}

var update = flag.Bool("update", false, "rewrite testdata seeds from the encoder")

// TestSeeds keeps the fuzz seeds in testdata equal to the encoder's output
// (go test -run TestSeeds -update rewrites them).
func TestSeeds(t *testing.T) {
	for _, n := range []int{0, 5, 64} {
		frame := make([]byte, UDP4HeaderLen+n)
		for i := range n {
			frame[UDP4HeaderLen+i] = byte(i)
		}
		if _, err := WriteUDP4(frame, &testHeader, n); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join("testdata", fmt.Sprintf("udp4-%d.bin", n))
		if *update {
			if err := os.WriteFile(p, frame, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, frame) {
			t.Fatalf("%s is stale (run with -update): %v", p, err)
		}
	}
}

func FuzzParseUDP4(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.bin")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, payload, err := ParseUDP4(b)
		if err != nil {
			return
		}
		// Whatever parses must re-encode to a frame that parses the same.
		out := make([]byte, UDP4HeaderLen+len(payload))
		copy(out[UDP4HeaderLen:], payload)
		if _, err := WriteUDP4(out, &h, len(payload)); err != nil {
			t.Fatal(err)
		}
		// A zero TTL is the encoder's "default", so it comes back as that.
		want := h
		if want.TTL == 0 {
			want.TTL = defaultTTL
		}
		h2, p2, err := ParseUDP4(out)
		if err != nil || h2 != want || !bytes.Equal(p2, payload) {
			t.Fatalf("re-encode: %+v %q %v", h2, p2, err)
		}
	})
}

func BenchmarkWriteUDP4(b *testing.B) {
	frame := make([]byte, 2048)
	b.ReportAllocs()
	b.SetBytes(UDP4HeaderLen + 64)
	for b.Loop() {
		_, _ = WriteUDP4(frame, &testHeader, 64)
	}
}
