package afxdp_test

import (
	"errors"
	"testing"

	"github.com/starwire/starwire/afxdp"
)

func TestHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		h    afxdp.PacketHeader
		data int
	}{
		{"data first", afxdp.PacketHeader{Type: afxdp.TypeData, Flags: afxdp.FlagFirst, Session: 1, Seq: 7, Msg: 3, Ack: 9, Window: 512}, 100},
		{"data last", afxdp.PacketHeader{Type: afxdp.TypeData, Flags: afxdp.FlagLast | afxdp.FlagGap, Session: ^uint64(0), Seq: ^uint32(0), Offset: 1 << 40}, 1432},
		{"ack", afxdp.PacketHeader{Type: afxdp.TypeAck, Session: 5, Ack: 1 << 31, Window: 64, Offset: 3}, 0},
		{"open", afxdp.PacketHeader{Type: afxdp.TypeOpen, Session: 99, Window: 512, Offset: 1472}, 0},
		{"open answer", afxdp.PacketHeader{Type: afxdp.TypeAck, Flags: afxdp.FlagSize, Session: 99, Window: 512, Offset: 1750}, 0},
		{"packed", afxdp.PacketHeader{Type: afxdp.TypeData, Flags: afxdp.FlagFirst | afxdp.FlagLast | afxdp.FlagPacked, Session: 3, Seq: 12, Msg: 40, Ack: 2, Window: 512}, 226},
		{"selective ack", afxdp.PacketHeader{Type: afxdp.TypeAck, Flags: afxdp.FlagGap | afxdp.FlagSack, Session: 7, Ack: 40, Window: 512, Offset: 2}, 64},
		{"reset", afxdp.PacketHeader{Type: afxdp.TypeReset, Session: 99}, 0},
		{"data resent", afxdp.PacketHeader{Type: afxdp.TypeData, Tx: 2, Session: 4, Seq: 77, Msg: 5, Ack: 1, Window: 512, Offset: 2864}, 1432},
		{"ack with echo and dsack", afxdp.PacketHeader{Type: afxdp.TypeAck, Flags: afxdp.FlagDsack, Session: 4, Msg: 70, Ack: 76, Window: 512, Offset: 1<<40 | 1<<32 | 77}, 0},
		{"keepalive probe", afxdp.PacketHeader{Type: afxdp.TypeAck, Flags: afxdp.FlagProbe, Session: 4, Ack: 76, Window: 512}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			h.Length = uint16(tt.data)
			b := make([]byte, afxdp.HeaderLen+tt.data+5) // trailing bytes are ignored
			afxdp.PutHeader(b, &h)
			got, data, err := afxdp.DecodeHeader(b)
			if err != nil || got != h || len(data) != tt.data {
				t.Fatalf("got %+v, %d bytes, %v; want %+v", got, len(data), err, h)
			}
		})
	}
}

func TestHeaderRejects(t *testing.T) {
	good := func() []byte {
		b := make([]byte, afxdp.HeaderLen+10)
		afxdp.PutHeader(b, &afxdp.PacketHeader{Type: afxdp.TypeData, Flags: afxdp.FlagFirst, Length: 10})
		return b
	}
	tests := []struct {
		name  string
		edit  func(b []byte) []byte
		error error
	}{
		{"short", func(b []byte) []byte { return b[:afxdp.HeaderLen-1] }, afxdp.ErrShortPacket},
		{"truncated data", func(b []byte) []byte { return b[:afxdp.HeaderLen+9] }, afxdp.ErrShortPacket},
		{"magic", func(b []byte) []byte { b[0] ^= 1; return b }, afxdp.ErrNotOurs},
		{"version", func(b []byte) []byte { b[2] = 9; return b }, afxdp.ErrNotOurs},
		{"type", func(b []byte) []byte { b[3] = 0; return b }, afxdp.ErrBadPacket},
		{"flags", func(b []byte) []byte { b[4] |= 0x80; return b }, afxdp.ErrBadPacket},
		{"transmission byte on an ack", func(b []byte) []byte {
			b[3], b[4], b[5], b[6] = byte(afxdp.TypeAck), 0, 1, 0
			return b[:afxdp.HeaderLen]
		}, afxdp.ErrBadPacket},
		{"dsack on data", func(b []byte) []byte { b[4] |= afxdp.FlagDsack; return b }, afxdp.ErrBadPacket},
		{"probe on data", func(b []byte) []byte { b[4] |= afxdp.FlagProbe; return b }, afxdp.ErrBadPacket},
		{"ack with data", func(b []byte) []byte { b[3], b[4] = byte(afxdp.TypeAck), 0; return b }, afxdp.ErrBadPacket},
		{"first not at zero", func(b []byte) []byte { b[32] = 1; return b }, afxdp.ErrBadPacket},
		{"size flag on data", func(b []byte) []byte { b[4] |= afxdp.FlagSize; return b }, afxdp.ErrBadPacket},
		{"sack flag on data", func(b []byte) []byte { b[4] |= afxdp.FlagSack; return b }, afxdp.ErrBadPacket},
		{"sack without bitmap", func(b []byte) []byte {
			b[3], b[4], b[6] = byte(afxdp.TypeAck), afxdp.FlagSack, 0
			return b[:afxdp.HeaderLen]
		}, afxdp.ErrBadPacket},
		{"packed, not first", func(b []byte) []byte { b[4] = afxdp.FlagLast | afxdp.FlagPacked; return b }, afxdp.ErrBadPacket},
		{"packed, not last", func(b []byte) []byte { b[4] = afxdp.FlagFirst | afxdp.FlagPacked; return b }, afxdp.ErrBadPacket},
		{"packed ack", func(b []byte) []byte {
			b[3], b[4] = byte(afxdp.TypeAck), afxdp.FlagSack|afxdp.FlagPacked
			return b
		}, afxdp.ErrBadPacket},
		{"sack on close", func(b []byte) []byte { b[3], b[4] = byte(afxdp.TypeClose), afxdp.FlagSack; return b }, afxdp.ErrBadPacket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := afxdp.DecodeHeader(tt.edit(good())); !errors.Is(err, tt.error) {
				t.Fatalf("got %v, want %v", err, tt.error)
			}
		})
	}
}

// FuzzDecodeHeader checks that the decoder never panics, never returns data
// past the datagram, and that whatever it accepts encodes back to the same
// header bytes. Seeds are real packets in testdata/fuzz.
func FuzzDecodeHeader(f *testing.F) {
	f.Add(make([]byte, afxdp.HeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, data, err := afxdp.DecodeHeader(b)
		if err != nil {
			return
		}
		if len(data) != int(h.Length) || afxdp.HeaderLen+len(data) > len(b) {
			t.Fatalf("data of %d bytes for length %d in %d", len(data), h.Length, len(b))
		}
		out := make([]byte, afxdp.HeaderLen)
		afxdp.PutHeader(out, &h)
		if string(out) != string(b[:afxdp.HeaderLen]) {
			t.Fatalf("re-encoded %x, was %x", out, b[:afxdp.HeaderLen])
		}
	})
}

func TestHeaderAllocs(t *testing.T) {
	b := make([]byte, afxdp.HeaderLen+64)
	h := afxdp.PacketHeader{Type: afxdp.TypeData, Length: 64, Seq: 1}
	if n := testing.AllocsPerRun(100, func() {
		afxdp.PutHeader(b, &h)
		afxdp.DecodeHeader(b)
	}); n != 0 {
		t.Fatalf("%v allocations per encode and decode", n)
	}
}
