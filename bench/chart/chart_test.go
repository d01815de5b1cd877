package chart

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/bench"
)

// TestWrite: a workload swept over sizes and concurrency gets a chart pair
// for each, one over concurrency only gets one pair, failed points are
// left out, and the files decode.
func TestWrite(t *testing.T) {
	var ms []bench.Measurement
	for _, proto := range []string{bench.ProtoGRPC, bench.ProtoTCP} {
		for _, size := range []int{64, 4096} {
			for _, conc := range []int{1, 8} {
				m := bench.Measurement{Point: bench.Point{Protocol: proto, Workload: bench.WorkEcho, Size: size, Concurrency: conc},
					Calls: 100, CallsPerSec: float64(1000 * conc), MBPerSec: 1, P50: 20, P99: 80}
				ms = append(ms, m)
			}
		}
		ms = append(ms,
			bench.Measurement{Point: bench.Point{Protocol: proto, Workload: bench.WorkPSMix, Size: 4096, Concurrency: 1}, CallsPerSec: 10, P50: 5, P99: 9},
			bench.Measurement{Point: bench.Point{Protocol: proto, Workload: bench.WorkPSMix, Size: 4096, Concurrency: 8}, CallsPerSec: 50, P50: 9, P99: 30},
			bench.Measurement{Point: bench.Point{Protocol: proto, Workload: bench.WorkFuse, Size: 4096, Concurrency: 1}, Err: "unavailable"})
	}
	dir := t.TempDir()
	paths, err := Write(&bench.Report{Date: "2026-01-01", Measurements: ms}, dir, "png", "svg")
	if err != nil {
		t.Fatal(err)
	}
	// echo: by size and by concurrency; psmix: by concurrency; each a
	// throughput and a latency chart, in two formats.
	if len(paths) != 3*2*2 {
		t.Errorf("%d charts: %v", len(paths), paths)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(p) {
		case ".png":
			if _, err := png.Decode(strings.NewReader(string(b))); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		case ".svg":
			if !strings.Contains(string(b), "<svg") {
				t.Errorf("%s: not SVG", p)
			}
		}
	}
}

// TestWritePeers: a fan-in sweep gets a latency and a memory-per-peer
// chart against peers for each workload, and no chart over its callers.
func TestWritePeers(t *testing.T) {
	var ms []bench.Measurement
	for _, proto := range []string{bench.ProtoGRPC, bench.ProtoTCP} {
		for _, peers := range []int{1, 10, 100} {
			ms = append(ms, bench.Measurement{Point: bench.Point{Protocol: proto, Workload: bench.WorkEcho, Size: 64, Concurrency: max(peers, 16), Peers: peers},
				Calls: 100, CallsPerSec: 1000, P50: 20, P99: 80, RSSPerPeer: 1 << 20 / float64(peers)})
		}
	}
	paths, err := Write(&bench.Report{Date: "2026-01-01", Measurements: ms}, t.TempDir(), "png")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || !strings.HasSuffix(paths[0], "echo-by-peers-latency.png") || !strings.HasSuffix(paths[1], "echo-by-peers-memory.png") {
		t.Errorf("charts: %v", paths)
	}
}
