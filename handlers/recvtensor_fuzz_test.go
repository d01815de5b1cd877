package handlers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// FuzzRecvTensorRequest checks the hand-written decoder against protobuf's:
// whatever protobuf decodes, it decodes the same way.
func FuzzRecvTensorRequest(f *testing.F) {
	addSeeds(f, "testdata/recvtensorrequest-*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseRecvTensorRequest(b)
		want := new(tfpb.RecvTensorRequest)
		if proto.Unmarshal(b, want) != nil {
			// The fast path skips fields it does not use without looking
			// inside them, so it may accept what protobuf refuses.
			return
		}
		if err != nil {
			t.Fatalf("protobuf decodes %v, the fast path fails: %v", want, err)
		}
		if got.step != want.StepId || string(got.key) != want.RendezvousKey || got.requestID != want.RequestId {
			t.Fatalf("parsed %+v, protobuf %v", got, want)
		}
	})
}

// FuzzRecvTensorResponse checks the pulling worker's in-place decoder
// against protobuf's, seeded with responses as a worker writes them and as
// gRPC carries them: whatever protobuf decodes, it decodes the same way.
func FuzzRecvTensorResponse(f *testing.F) {
	addSeeds(f, "testdata/recvtensorresponse-*.bin")
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseRecvTensorResponse(b)
		want := new(tfpb.RecvTensorResponse)
		if proto.Unmarshal(b, want) != nil {
			return // as above, skipped fields are not looked into
		}
		if err != nil {
			t.Fatalf("protobuf decodes %v, the fast path fails: %v", want, err)
		}
		if got.isDead != want.IsDead || got.sendStart != want.SendStartMicros {
			t.Fatalf("parsed %+v, protobuf %v", got, want)
		}
		// A response over gRPC carries its tensor in the protobuf, strings
		// in either of TensorFlow's encodings: it decodes or is refused as
		// InvalidArgument.
		if want.Tensor == nil || hungry(want.Tensor) {
			return
		}
		tn, err := tensor.FromProto(want.Tensor)
		if err != nil {
			if status.CodeOf(err) != wire.InvalidArgument {
				t.Fatalf("tensor refused with %v, want InvalidArgument", err)
			}
			return
		}
		defer tn.Buf.Release()
		if err := tn.Check(); err != nil {
			t.Fatalf("decoded tensor fails Check: %v", err)
		}
	})
}

// hungry reports whether p's shape is legal but holds over a million
// elements, which a fuzzer should not make the decoder allocate.
func hungry(p *tfpb.TensorProto) bool {
	n := int64(1)
	for _, d := range p.GetTensorShape().GetDim() {
		if d.GetSize() > 1<<20 || n*max(d.GetSize(), 1) > 1<<20 {
			return true
		}
		n *= max(d.GetSize(), 1)
	}
	return false
}

// addSeeds adds the contents of the testdata files pattern matches to f's
// corpus. TestFuzzSeedsDecode checks that the patterns match.
func addSeeds(f *testing.F, pattern string) {
	seeds, _ := filepath.Glob(pattern)
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// TestFuzzSeedsDecode checks that testdata's seeds are encodings of the
// messages their names say.
func TestFuzzSeedsDecode(t *testing.T) {
	for _, pattern := range []string{"testdata/recvtensorrequest-*.bin", "testdata/recvtensorresponse-*.bin"} {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			t.Fatalf("no seeds match %s", pattern)
		}
		for _, file := range files {
			b, _ := os.ReadFile(file)
			var m proto.Message = new(tfpb.RecvTensorRequest)
			if strings.HasPrefix(filepath.Base(file), "recvtensorresponse-") {
				m = new(tfpb.RecvTensorResponse)
			}
			if err := proto.Unmarshal(b, m); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
	}
}
