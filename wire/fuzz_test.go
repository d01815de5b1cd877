package wire

import (
	"bytes"
	"errors"
	"testing"
)

// seedFrames are real frames, the starting points for the fuzzers; the same
// frames are committed under testdata/fuzz.
func seedFrames(t testing.TB) [][]byte {
	msgs := []*Message{
		{Header: Header{Kind: KindRequest, Method: 7, CallID: 1}, Meta: []byte("\x08\x07\x12\x01k")},
		{Header: Header{Kind: KindError, Status: NotFound, CallID: 2}, Meta: []byte("no such key")},
		{Header: Header{Kind: KindCancel, CallID: 3}},
		{Header: Header{Kind: KindResponse, CallID: 4}, Meta: []byte{0x10, 0x01},
			Tensors: []Tensor{makeTensor(DTFloat, []int64{2, 3}), makeTensor(DTString, []int64{3}), makeTensor(DTBool, nil)}},
	}
	var frames [][]byte
	for _, m := range msgs {
		frames = append(frames, encode(t, m))
	}
	return frames
}

func FuzzParseHeader(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr[:HeaderSize])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b, nil)
		if err != nil {
			return
		}
		// Whatever parses must re-encode to the same bytes.
		if again := AppendHeader(nil, &h); !bytes.Equal(again, b[:HeaderSize]) {
			t.Fatalf("re-encoded header %x differs from %x", again, b[:HeaderSize])
		}
	})
}

func FuzzDecodeFrame(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	lim := &Limits{MaxMeta: 1 << 16, MaxTensors: 64, MaxPayload: 1 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := decode(b, lim)
		if err != nil {
			for _, want := range []error{ErrShort, ErrMagic, ErrVersion, ErrKind, ErrTooLarge, ErrMalformed, ErrDType, ErrShape} {
				if errors.Is(err, want) {
					return
				}
			}
			t.Fatalf("untyped error: %v", err)
		}
		defer in.Release()
		for i := range in.Tensors {
			tensor := &in.Tensors[i]
			if err := tensor.Check(); err != nil {
				t.Fatalf("accepted tensor %d fails Check: %v", i, err)
			}
			if tensor.DType == DTString {
				tensor.Strings(nil) // must not panic
			}
		}
		// An accepted frame re-encodes to the same bytes.
		m := &Message{Header: in.Header, Meta: in.Meta, Tensors: in.Tensors}
		if again := encode(t, m); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded frame differs")
		}
	})
}
