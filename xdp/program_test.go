package xdp

import (
	"math"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

const testPort = 7470

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
	ipA  = net.IP{198, 18, 200, 1}
	ipB  = net.IP{198, 18, 200, 2}
	ipC  = net.IP{198, 18, 200, 3}
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func eth() *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
}

func ip4(src net.IP, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src, DstIP: ipB}
}

func udpFrame(t testing.TB, src net.IP, dport uint16, opts ...layers.IPv4Option) []byte {
	ip := ip4(src, layers.IPProtocolUDP)
	ip.Options = opts
	udp := &layers.UDP{SrcPort: 40000, DstPort: layers.UDPPort(dport)}
	_ = udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, eth(), ip, udp, gopacket.Payload(make([]byte, 22)))
}

func TestProgramVerdicts(t *testing.T) {
	netnstest.Require(t)
	starwire := udpFrame(t, ipA, testPort)
	withOptions := udpFrame(t, ipA, testPort, layers.IPv4Option{OptionType: 1}, layers.IPv4Option{OptionType: 1},
		layers.IPv4Option{OptionType: 1}, layers.IPv4Option{OptionType: 0})
	tcp := &layers.TCP{SrcPort: 40000, DstPort: testPort, SYN: true, Window: 100}
	tcpIP := ip4(ipA, layers.IPProtocolTCP)
	_ = tcp.SetNetworkLayerForChecksum(tcpIP)
	arp := serialize(t, &layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: layers.ARPRequest, SourceHwAddress: macA, SourceProtAddress: ipA, DstHwAddress: make([]byte, 6), DstProtAddress: ipB})
	fragment := append([]byte(nil), starwire...)
	fragment[14+6] |= 0x20 // more fragments
	badIHL := append([]byte(nil), starwire...)
	badIHL[14] = 0x4f // claims 60 header bytes, longer than the frame
	shortIHL := append([]byte(nil), starwire...)
	shortIHL[14] = 0x44
	version6 := append([]byte(nil), starwire...)
	version6[14] = 0x65

	tests := []struct {
		name      string
		frame     []byte
		opts      Options
		verdict   uint32
		increment Counter
	}{
		{"starwire udp, no socket", starwire, Options{}, xdpPass, CounterNoSocket},
		{"starwire udp with ip options", withOptions, Options{}, xdpPass, CounterNoSocket},
		{"other udp port", udpFrame(t, ipA, 53), Options{}, xdpPass, CounterPassed},
		{"tcp to starwire port", serialize(t, eth(), tcpIP, tcp), Options{}, xdpPass, CounterPassed},
		{"arp", arp, Options{}, xdpPass, CounterPassed},
		{"fragment", fragment, Options{}, xdpPass, CounterPassed},
		{"truncated ipv4", starwire[:14+12], Options{}, xdpPass, CounterMalformed},
		{"truncated udp", starwire[:14+20+4], Options{}, xdpPass, CounterMalformed},
		{"ihl beyond frame", badIHL[:14+20+8], Options{}, xdpPass, CounterMalformed},
		{"ihl below 5", shortIHL, Options{}, xdpPass, CounterMalformed},
		{"version 6 in ipv4 frame", version6, Options{}, xdpPass, CounterMalformed},
		{"allowlisted source", starwire, Options{Allow: []netip.Addr{netip.AddrFrom4([4]byte(ipA))}}, xdpPass, CounterNoSocket},
		{"not allowlisted", udpFrame(t, ipC, testPort), Options{Allow: []netip.Addr{netip.AddrFrom4([4]byte(ipA))}}, xdpDrop, CounterNotAllowed},
		{"empty allowlist enabled", starwire, Options{Allowlist: true}, xdpDrop, CounterNotAllowed},
		{"not allowlisted, other port", udpFrame(t, ipC, 53), Options{Allowlist: true}, xdpPass, CounterPassed},
		{"injected loss", starwire, Options{Loss: 1}, xdpDrop, CounterImpaired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Ports = []uint16{testPort, 9999}
			p, err := Load(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			got, err := p.BPF().Run(&ebpf.RunOptions{Data: tt.frame})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.verdict {
				t.Fatalf("verdict %d, want %d", got, tt.verdict)
			}
			c, err := p.Counters()
			if err != nil {
				t.Fatal(err)
			}
			want := Counters{}
			switch tt.increment {
			case CounterNoSocket:
				want.NoSocket, want.Passed = 1, 1
			case CounterPassed:
				want.Passed = 1
			case CounterMalformed:
				want.Malformed = 1
			case CounterNotAllowed:
				want.NotAllowed = 1
			case CounterImpaired:
				want.Impaired = 1
			}
			if c != want {
				t.Fatalf("counters %+v, want %+v", c, want)
			}
		})
	}
}

func TestLossRate(t *testing.T) {
	netnstest.Require(t)
	p, err := Load(Options{Ports: []uint16{testPort}, Loss: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	frame := udpFrame(t, ipA, testPort)
	const runs = 4000
	dropped := 0
	for range runs {
		v, err := p.BPF().Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		if v == xdpDrop {
			dropped++
		}
	}
	if dropped < runs/4-runs/10 || dropped > runs/4+runs/10 {
		t.Fatalf("%d of %d dropped at loss 0.25", dropped, runs)
	}
}

// TestNoImpairmentByDefault: the program Load builds for a zero
// Options.Loss, the one every product path loads, draws no random number
// and reads nothing for impairment per packet; a loss rate is an
// immediate, not a map slot, so even a test build reads the config map
// only for the allowlist.
func TestNoImpairmentByDefault(t *testing.T) {
	for _, tt := range []struct {
		loss  uint32
		draws int
	}{{0, 0}, {1 << 30, 1}} {
		draws, configs, impaired := 0, 0, false
		for _, ins := range instructions(tt.loss) {
			if ins.IsBuiltinCall() && ins.Constant == int64(asm.FnGetPrandomU32) {
				draws++
			}
			if ins.Reference() == mapConfig {
				configs++
			}
			impaired = impaired || ins.Symbol() == "impaired"
		}
		if draws != tt.draws || configs != 1 || impaired != (tt.loss > 0) {
			t.Errorf("loss threshold %d: %d random draws (want %d), %d config map loads (want 1), impaired exit %v",
				tt.loss, draws, tt.draws, configs, impaired)
		}
	}
	for _, rate := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := Load(Options{Loss: rate}); err == nil {
			t.Errorf("Load with loss %v accepted", rate)
		}
	}
}

func TestLoadRejects(t *testing.T) {
	if _, err := Load(Options{Ports: make([]uint16, 65)}); err == nil {
		t.Fatal("65 ports accepted")
	}
	netnstest.Require(t)
	if _, err := Load(Options{Allow: []netip.Addr{netip.MustParseAddr("2001:db8::1")}}); err == nil {
		t.Fatal("IPv6 allowlist entry accepted")
	}
}

func layersOption(typ uint8) layers.IPv4Option { return layers.IPv4Option{OptionType: typ} }

func addrOf(a [4]byte) netip.Addr { return netip.AddrFrom4(a) }
