package capture

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// FuzzStream feeds the stream reassembler arbitrary bytes in arbitrary
// pieces: it must not panic, and whatever it writes must read back as a
// valid capture. Seeded with a real stream as an AF_XDP link writes it.
func FuzzStream(f *testing.F) {
	var seed bytes.Buffer
	w := pcapgo.NewWriter(&seed)
	w.WriteFileHeader(snapLen, layers.LinkTypeEthernet)
	for _, n := range []int{42, 1514, 60} {
		w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: n, Length: n}, make([]byte, n))
	}
	f.Add(seed.Bytes(), uint8(7))
	f.Add(seed.Bytes()[:40], uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		path := filepath.Join(t.TempDir(), "f.pcap")
		file, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		s := file.Stream()
		k := int(chunk%64) + 1
		for b := data; len(b) > 0; {
			n := min(k, len(b))
			if _, err := s.Write(b[:n]); err != nil {
				break
			}
			b = b[n:]
		}
		written := file.Frames()
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		rf, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer rf.Close()
		r, err := pcapgo.NewReader(rf)
		if err != nil {
			t.Fatal(err)
		}
		read := 0
		for {
			if _, _, err := r.ReadPacketData(); err != nil {
				break
			}
			read++
		}
		if read != written {
			t.Fatalf("wrote %d records, read back %d", written, read)
		}
	})
}
