package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/netns/netnstest"
)

// A tiny fan-in sweep in this process: each point spreads its calls over
// its peers, in several client shares, and reads the server's memory (this
// process's, here); the table shows peers and memory.
func TestPeersSweep(t *testing.T) {
	ms, err := RunSweep(context.Background(), tinyPeersSweep(4, ProtoGRPC, ProtoTCP, ProtoUDP))
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * 3 * 2; len(ms) != want {
		t.Fatalf("%d measurements, want %d", len(ms), want)
	}
	checkPeers(t, ms)
	var table bytes.Buffer
	if err := (&Report{Measurements: ms}).WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "KiB/peer") || !strings.Contains(table.String(), "peers") {
		t.Errorf("table:\n%s", table.String())
	}
}

// tinyPeersSweep is a fan-in sweep of protocols small enough for a test:
// echo and psmix at 1 and 6 peers, 50 ms each, over procs client
// processes.
func tinyPeersSweep(procs int, protocols ...string) SweepConfig {
	return SweepConfig{
		Protocols:   protocols,
		Workloads:   []Workload{WorkEcho, WorkPSMix},
		Sizes:       map[Workload][]int{WorkEcho: {64}, WorkPSMix: {4096}},
		Concurrency: []int{4},
		Peers:       []int{1, 6},
		ClientProcs: procs,
		Loop:        LoopOpen,
		Rate:        2000,
		Duration:    50 * time.Millisecond,
		Warmup:      5 * time.Millisecond,
	}
}

// checkPeers fails t for a fan-in measurement that failed or is not
// plausible.
func checkPeers(t *testing.T, ms []Measurement) {
	t.Helper()
	for _, m := range ms {
		switch {
		case m.Err != "":
			t.Errorf("%+v: %s", m.Point, m.Err)
		case m.Calls == 0 || m.P50 <= 0 || m.P99 < m.P50 || m.ServerRSS <= 0 || m.ServerRSSBase <= 0:
			t.Errorf("%+v: implausible %+v", m.Point, m)
		case m.Concurrency < m.Peers:
			t.Errorf("%+v: fewer callers than peers", m.Point)
		}
	}
}

// A tiny AF_XDP fan-in sweep: the server on its veth end, in this
// process, the peers' endpoints in the other end's namespace.
func TestPeersSweepAFXDP(t *testing.T) {
	netnstest.Require(t)
	ms, err := RunSweep(context.Background(), tinyPeersSweep(3, ProtoAFXDP))
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * 2; len(ms) != want {
		t.Fatalf("%d measurements, want %d", len(ms), want)
	}
	checkPeers(t, ms)
}

// shares spreads a point's peers and rate over the client processes, and
// gives every peer at least one caller.
func TestPeersShares(t *testing.T) {
	p := Point{Peers: 10, Concurrency: 16, Rate: 1000}
	specs := shares(p, SweepConfig{ClientProcs: 4}, "addr")
	if len(specs) != 4 {
		t.Fatalf("%d shares, want 4", len(specs))
	}
	var peers int
	var rate float64
	for _, s := range specs {
		peers += s.Peers
		rate += s.Rate
		if s.Callers != 2 {
			t.Errorf("%d callers a peer, want 2", s.Callers)
		}
	}
	if peers != 10 || rate < 999.9 || rate > 1000.1 {
		t.Errorf("shares hold %d peers at %.1f calls/s, want 10 at 1000", peers, rate)
	}
	if specs := shares(Point{Peers: 2, Concurrency: 1, Rate: 10}, SweepConfig{}, "addr"); len(specs) != 2 {
		t.Errorf("%d shares for 2 peers, want 2", len(specs))
	}
}
