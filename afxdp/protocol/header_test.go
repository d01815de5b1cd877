package protocol_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/starwire/starwire/afxdp/protocol"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    protocol.PacketHeader
		data int
	}{
		{"data first", protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Session: 1, Seq: 7, Msg: 3, Ack: 9, Window: 512}, 100},
		{"data last", protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagLast | protocol.FlagGap, Session: ^uint64(0), Seq: ^uint32(0), Offset: 1 << 40}, 1432},
		{"ack", protocol.PacketHeader{Type: protocol.TypeAck, Session: 5, Ack: 1 << 31, Window: 64, Offset: 3}, 0},
		{"open", protocol.PacketHeader{Type: protocol.TypeOpen, Session: 99, Window: 512, Offset: 1472}, 0},
		{"authenticated open", protocol.PacketHeader{Type: protocol.TypeOpen, Session: 99, Window: 512, Offset: 1472, Token: 0xfeed}, protocol.OpenAuthLen},
		{"token", protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast, Session: 99, Token: ^uint64(0) - 1}, 10},
		{"open answer", protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagSize, Session: 99, Window: 512, Offset: 1750}, 0},
		{"packed", protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast | protocol.FlagPacked, Session: 3, Seq: 12, Msg: 40, Ack: 2, Window: 512}, 226},
		{"selective ack", protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagGap | protocol.FlagSack, Session: 7, Ack: 40, Window: 512, Offset: 2}, 64},
		{"reset", protocol.PacketHeader{Type: protocol.TypeReset, Session: 99}, 0},
		{"data resent", protocol.PacketHeader{Type: protocol.TypeData, Tx: 2, Session: 4, Seq: 77, Msg: 5, Ack: 1, Window: 512, Offset: 2864}, 1432},
		{"ack with echo and dsack", protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagDsack, Session: 4, Msg: 70, Ack: 76, Window: 512, Offset: 1<<40 | 1<<32 | 77}, 0},
		{"keepalive probe", protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagProbe, Session: 4, Ack: 76, Window: 512}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			h.Length = uint16(tt.data)
			b := make([]byte, protocol.HeaderLen+tt.data+5) // trailing bytes are ignored
			protocol.PutHeader(b, &h)
			got, data, err := protocol.DecodeHeader(b)
			if err != nil || got != h || len(data) != tt.data {
				t.Fatalf("got %+v, %d bytes, %v; want %+v", got, len(data), err, h)
			}
		})
	}
}

func TestHeaderRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, protocol.HeaderLen+10)
		protocol.PutHeader(b, &protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Length: 10})
		return b
	}
	tests := []struct {
		name  string
		edit  func(b []byte) []byte
		error error
	}{
		{"short", func(b []byte) []byte { return b[:protocol.HeaderLen-1] }, protocol.ErrShortPacket},
		{"truncated data", func(b []byte) []byte { return b[:protocol.HeaderLen+9] }, protocol.ErrShortPacket},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, protocol.ErrNotOurs},
		{"version", func(b []byte) []byte { b[2] = 9; return b }, protocol.ErrNotOurs},
		{"type", func(b []byte) []byte { b[3] = 0; return b }, protocol.ErrBadPacket},
		{"flags", func(b []byte) []byte { b[4] |= 0x80; return b }, protocol.ErrBadPacket},
		{"transmission byte on an ack", func(b []byte) []byte {
			b[3], b[4], b[5], b[6] = byte(protocol.TypeAck), 0, 1, 0
			return b[:protocol.HeaderLen]
		}, protocol.ErrBadPacket},
		{"dsack on data", func(b []byte) []byte { b[4] |= protocol.FlagDsack; return b }, protocol.ErrBadPacket},
		{"probe on data", func(b []byte) []byte { b[4] |= protocol.FlagProbe; return b }, protocol.ErrBadPacket},
		{"ack with data", func(b []byte) []byte { b[3], b[4] = byte(protocol.TypeAck), 0; return b }, protocol.ErrBadPacket},
		{"first not at zero", func(b []byte) []byte { b[32] = 1; return b }, protocol.ErrBadPacket},
		{"size flag on data", func(b []byte) []byte { b[4] |= protocol.FlagSize; return b }, protocol.ErrBadPacket},
		{"sack flag on data", func(b []byte) []byte { b[4] |= protocol.FlagSack; return b }, protocol.ErrBadPacket},
		{"sack without bitmap", func(b []byte) []byte {
			b[3], b[4], b[6] = byte(protocol.TypeAck), protocol.FlagSack, 0
			return b[:protocol.HeaderLen]
		}, protocol.ErrBadPacket},
		{"packed, not first", func(b []byte) []byte { b[4] = protocol.FlagLast | protocol.FlagPacked; return b }, protocol.ErrBadPacket},
		{"packed, not last", func(b []byte) []byte { b[4] = protocol.FlagFirst | protocol.FlagPacked; return b }, protocol.ErrBadPacket},
		{"packed ack", func(b []byte) []byte {
			b[3], b[4] = byte(protocol.TypeAck), protocol.FlagSack|protocol.FlagPacked
			return b
		}, protocol.ErrBadPacket},
		{"open with data not its authentication", func(b []byte) []byte { b[3], b[4] = byte(protocol.TypeOpen), 0; return b }, protocol.ErrBadPacket},
		{"previous version", func(b []byte) []byte { b[2] = 2; return b }, protocol.ErrNotOurs},
		{"sack on close", func(b []byte) []byte { b[3], b[4] = byte(protocol.TypeClose), protocol.FlagSack; return b }, protocol.ErrBadPacket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := protocol.DecodeHeader(tt.edit(good())); !errors.Is(err, tt.error) {
				t.Fatalf("got %v, want %v", err, tt.error)
			}
		})
	}
}

// FuzzDecodeHeader checks that the decoder never panics, never returns data
// past the datagram, and that whatever it accepts encodes back to the same
// header bytes. Seeds are real packets in testdata/fuzz.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(make([]byte, protocol.HeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := protocol.DecodeHeader(b)
		if err != nil {
			return
		}
		if len(data) != int(h.Length) || protocol.HeaderLen+len(data) > len(b) {
			t.Fatalf("data of %d bytes for length %d in %d", len(data), h.Length, len(b))
		}
		out := make([]byte, protocol.HeaderLen)
		protocol.PutHeader(out, &h)
		if string(out) != string(b[:protocol.HeaderLen]) {
			t.Fatalf("re-encoded %x, was %x", out, b[:protocol.HeaderLen])
		}
	})
}

func TestHeaderAllocs(t *testing.T) {
	b := make([]byte, protocol.HeaderLen+64)
	h := protocol.PacketHeader{Type: protocol.TypeData, Length: 64, Seq: 1}
	if n := testing.AllocsPerRun(100, func() {
		protocol.PutHeader(b, &h)
		protocol.DecodeHeader(b)
	}); n != 0 {
		t.Fatalf("%v allocations per encode and decode", n)
	}
}

// TestHeaderSeedsAreFrames checks that FuzzDecodeHeader's seeds are packets
// of the current format, which the decoder takes, so that the fuzzer
// starts from real frames.
func TestHeaderSeedsAreFrames(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzDecodeHeader/*")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d seeds: %v", len(files), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		lit, ok := strings.CutPrefix(lines[len(lines)-1], "[]byte(")
		if !ok {
			t.Fatalf("%s: not a []byte seed", f)
		}
		pkt, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, _, err := protocol.DecodeHeader([]byte(pkt)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
