package xdp

import (
	"encoding/binary"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

// model is the steering decision written plainly in Go, for a program
// with no socket registered: the fuzz test holds the eBPF program to it.
func model(f []byte, port uint16, allowlist bool, allowed [4]byte) (uint32, Counter) {
	if len(f) < 14 {
		return xdpPass, CounterMalformed
	}
	if binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		return xdpPass, CounterPassed
	}
	if len(f) < 34 {
		return xdpPass, CounterMalformed
	}
	ip := f[14:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 {
		return xdpPass, CounterMalformed
	}
	if ip[9] != 17 || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 {
		return xdpPass, CounterPassed
	}
	if len(f) < 14+ihl+8 {
		return xdpPass, CounterMalformed
	}
	if binary.BigEndian.Uint16(ip[ihl+2:]) != port {
		return xdpPass, CounterPassed
	}
	if allowlist && [4]byte(ip[12:16]) != allowed {
		return xdpDrop, CounterNotAllowed
	}
	return xdpPass, CounterNoSocket
}

var update = flag.Bool("update", false, "rewrite testdata seeds")

// seeds are the frames of the verdict table, kept in testdata so the fuzz
// corpus starts from real encodings (go test -run TestSeeds -update).
func TestSeeds(t *testing.T) {
	frames := map[string][]byte{
		"udp-starwire": udpFrame(t, ipA, testPort),
		"udp-other":    udpFrame(t, ipA, 53),
		"udp-options": udpFrame(t, ipA, testPort, layersOption(1), layersOption(1),
			layersOption(1), layersOption(0)),
		"udp-stranger": udpFrame(t, ipC, testPort),
	}
	for name, frame := range frames {
		p := filepath.Join("testdata", name+".bin")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, frame, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != string(frame) {
			t.Fatalf("%s is stale (run with -update): %v", p, err)
		}
	}
}

func FuzzProgramMatchesModel(f *testing.F) {
	paths, _ := filepath.Glob("testdata/*.bin")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
	netnstest.Require(f)
	allowed := [4]byte(ipA)
	progs := map[bool]*Program{}
	for _, on := range []bool{false, true} {
		p, err := Load(Options{Ports: []uint16{testPort}, Allowlist: on})
		if err != nil {
			f.Fatal(err)
		}
		if err := p.Allow(addrOf(allowed)); err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { p.Close() })
		progs[on] = p
	}
	f.Fuzz(func(t *testing.T, frame []byte, allowlist bool) {
		if len(frame) < 14 || len(frame) > 1500 {
			return // the kernel's test runner takes 14 bytes to a page
		}
		p := progs[allowlist]
		before, err := p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.BPF().Run(&ebpf.RunOptions{Data: frame})
		if err != nil {
			t.Fatal(err)
		}
		after, err := p.Counters()
		if err != nil {
			t.Fatal(err)
		}
		wantVerdict, wantCounter := model(frame, testPort, allowlist, allowed)
		if got != wantVerdict {
			t.Fatalf("verdict %d, model says %d for %x", got, wantVerdict, frame)
		}
		if d := diff(before, after); d != wantCounter {
			t.Fatalf("counter %v moved, model says %v for %x", d, wantCounter, frame)
		}
	})
}

// diff names the one counter that moved (NoSocket wins over Passed, which
// moves with it); numCounters means none or several.
func diff(a, b Counters) Counter {
	switch {
	case b.NoSocket == a.NoSocket+1 && b.Passed == a.Passed+1:
		return CounterNoSocket
	case b.Passed == a.Passed+1:
		return CounterPassed
	case b.Malformed == a.Malformed+1:
		return CounterMalformed
	case b.NotAllowed == a.NotAllowed+1:
		return CounterNotAllowed
	case b.Redirected == a.Redirected+1:
		return CounterRedirected
	}
	return numCounters
}
