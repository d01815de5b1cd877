package handlers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

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
	})
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
