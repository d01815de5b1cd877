package main

import (
	"context"
	bin "encoding/binary"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// dissector is the Wireshark dissector, from this package's directory.
var dissector = filepath.Join("..", "..", "afxdp", "protocol", "wireshark", "starwire.lua")

// requireTshark returns tshark's path. Without it the test skips, except
// under CI=true or STARWIRE_REQUIRE_TSHARK=1, where it fails: CI installs
// tshark (.ci/run), and a dissector test that skipped there would check
// nothing.
func requireTshark(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("tshark")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" || os.Getenv("STARWIRE_REQUIRE_TSHARK") == "1" {
		t.Fatal("tshark is needed to test the Wireshark dissector (apt-get install tshark; .ci/run installs it)")
	}
	t.Skip("no tshark: the Wireshark dissector is not tested (STARWIRE_REQUIRE_TSHARK=1 makes this a failure)")
	return ""
}

// tsharkFields runs tshark with the dissector over capture and returns a
// row per packet of the fields asked for.
func tsharkFields(t *testing.T, tshark, capture string, fields ...string) [][]string {
	t.Helper()
	args := []string{"-X", "lua_script:" + dissector, "-r", capture, "-T", "fields", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tshark, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user's own plugins or preferences
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark %v: %v", args, err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		rows = append(rows, strings.Split(l, "\t"))
	}
	return rows
}

// TestDissectorOnTrainCapture captures train's packets over the packet
// protocol on kernel UDP and dissects them with tshark and the Lua
// dissector: every packet has a session and a type, and the data packets
// that start frames show the frame header inside.
func TestDissectorOnTrainCapture(t *testing.T) {
	tshark := requireTshark(t)
	capture := filepath.Join(t.TempDir(), "train.pcap")
	code, out, errOut := runMain(t, "train", "--transport", "udp", "--afxdp", "off", "--steps", "10", "--vocab", "5000",
		"--held_out", "256", "--pcap", capture)
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errOut, out)
	}
	m := regexp.MustCompile(`(?m)^pcap: (\d+) frames in `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("train did not say what it captured:\n%s", out)
	}
	frames, _ := strconv.Atoi(m[1])
	rows := tsharkFields(t, tshark, capture, "starwire.session", "starwire.type", "starwire.seq", "starwire.ack", "starwire.frame.kind", "starwire.frame.call_id")
	if len(rows) != frames || frames < 20 {
		t.Fatalf("tshark printed %d rows for the %d frames train wrote", len(rows), frames)
	}
	withFrame := 0
	for i, r := range rows {
		if len(r) != 6 || r[0] == "" || r[1] == "" || r[2] == "" || r[3] == "" {
			t.Fatalf("packet %d: fields %q, want a session, type, packet number and ack", i+1, r)
		}
		if r[4] != "" && r[5] != "" {
			withFrame++
		}
	}
	if withFrame == 0 {
		t.Error("no packet showed a starwire frame header inside")
	}
}

// TestDissectorFields dissects packets made for the purpose: an ACK whose
// SACK bitmap holds packets 12, 13 and 15 past ack 10, and a DATA packet
// packing two request frames.
func TestDissectorFields(t *testing.T) {
	tshark := requireTshark(t)
	ack := make([]byte, protocol.HeaderLen+1)
	protocol.PutHeader(ack, &protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagSack | protocol.FlagGap,
		Length: 1, Session: 0xabc, Ack: 10, Window: 64})
	ack[protocol.HeaderLen] = 0b1011 // ack+1+i for i = 0, 1, 3: packets 11, 12 and 14
	var packed []byte
	for _, id := range []uint64{7, 9} {
		f := wire.AppendHeader(nil, &wire.Header{Kind: wire.KindRequest, Method: 0x1234, CallID: id, MetaLen: 3})
		f = append(f, "abc"...)
		packed = bin.LittleEndian.AppendUint16(packed, uint16(len(f)))
		packed = append(packed, f...)
	}
	data := make([]byte, protocol.HeaderLen, protocol.HeaderLen+len(packed))
	protocol.PutHeader(data, &protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast | protocol.FlagPacked,
		Length: uint16(len(packed)), Session: 0xabc, Seq: 3, Msg: 5, Ack: 1, Window: 64})
	data = append(data, packed...)
	capture := writePcap(t, ack, data)
	rows := tsharkFields(t, tshark, capture, "starwire.type", "starwire.sack", "starwire.frame.kind", "starwire.frame.call_id", "starwire.frame.method", "starwire.frame.meta_len")
	want := [][]string{
		{"2", "11-12,14", "", "", "", ""},
		{"1", "", "1,1", "7,9", "0x00001234,0x00001234", "3,3"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for i := range want {
		if strings.Join(rows[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("packet %d: fields %q, want %q", i+1, rows[i], want[i])
		}
	}
}

// writePcap writes each payload as an Ethernet/IPv4/UDP frame between two
// loopback ports to a pcap file and returns its path.
func writePcap(t *testing.T, payloads ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "made.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriter(f)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IPv4(127, 0, 0, 1), DstIP: net.IPv4(127, 0, 0, 1)}
		udp := &layers.UDP{SrcPort: 40001, DstPort: 40002}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(p)); err != nil {
			t.Fatal(err)
		}
		b := buf.Bytes()
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: len(b), Length: len(b)}, b); err != nil {
			t.Fatal(err)
		}
	}
	return path
}
