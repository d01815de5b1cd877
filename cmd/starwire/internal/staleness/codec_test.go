package staleness

import (
	"bytes"
	"testing"
)

// FuzzRawCodec checks that any bytes either decode to a message that
// encodes back to them, or fail, and never panic; seeded from encodings.
func FuzzRawCodec(f *testing.F) {
	for _, m := range []*message{
		{version: 0},
		{version: 1, data: []byte("blob")},
		{version: 1 << 40, data: bytes.Repeat([]byte{7}, 300)},
	} {
		b, err := rawCodec{}.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, 4)
	}
	f.Add([]byte{1, 2, 3}, 0)
	f.Fuzz(func(t *testing.T, b []byte, dstLen int) {
		dstLen = max(0, min(dstLen, 1<<16))
		m := message{dst: make([]byte, dstLen)}
		if err := (rawCodec{}).Unmarshal(b, &m); err != nil {
			if len(b) >= 8 {
				t.Fatalf("%d bytes failed to decode: %v", len(b), err)
			}
			return
		}
		out, err := rawCodec{}.Marshal(&message{version: m.version, data: m.data})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded %x as %x", b, out)
		}
	})
}

func TestRawCodecRejectsOtherTypes(t *testing.T) {
	if _, err := (rawCodec{}).Marshal("x"); err == nil {
		t.Error("Marshal of a string succeeded")
	}
	if err := (rawCodec{}).Unmarshal(make([]byte, 8), new(int)); err == nil {
		t.Error("Unmarshal into an int succeeded")
	}
}
