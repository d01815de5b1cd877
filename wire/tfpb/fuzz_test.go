package tfpb

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// FuzzDecodeRecvTensorResponse feeds arbitrary bytes to the decoder of the
// message starwire receives most often from TensorFlow peers. Whatever
// decodes must re-encode and decode to an equal message, unknown fields
// included.
func FuzzDecodeRecvTensorResponse(f *testing.F) {
	for _, tc := range goldenCases() {
		if b, err := proto.Marshal(tc.msg); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, newMsg := range []func() proto.Message{
			func() proto.Message { return new(RecvTensorResponse) },
			func() proto.Message { return new(RunGraphRequest) },
		} {
			m := newMsg()
			if proto.Unmarshal(data, m) != nil {
				continue
			}
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatalf("re-encode %T: %v", m, err)
			}
			again := newMsg()
			if err := proto.Unmarshal(b, again); err != nil {
				t.Fatalf("decode re-encoded %T: %v", m, err)
			}
			if !proto.Equal(m, again) {
				t.Fatalf("%T changed across re-encoding: %v vs %v", m, m, again)
			}
		}
	})
}
