package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/bench"
)

// TestBenchSmoke runs a tiny sweep with the servers in another process, as
// users run it (AF_XDP's in a network namespace, over a veth pair), and
// reads what it wrote.
func TestBenchSmoke(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	out := t.TempDir()
	code, stdout, stderr := runBinary(t, nil, "bench", "--smoke", "--workloads", "echo,recvtensor", "--protocols", "grpc,starwire-tcp,starwire-afxdp",
		"--concurrency", "4", "--out", out)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "separate processes") || !strings.Contains(stdout, "starwire-tcp") {
		t.Errorf("stdout:\n%s", stdout)
	}
	f, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := bench.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Layout != "separate processes" || len(r.Measurements) != 2*2*3 {
		t.Fatalf("report: layout %q, %d measurements", r.Layout, len(r.Measurements))
	}
	requireXDP := os.Getenv("STARWIRE_REQUIRE_AFXDP") == "1"
	for _, m := range r.Measurements {
		if m.Protocol == bench.ProtoAFXDP && !requireXDP && strings.Contains(m.Err, bench.ErrUnavailable.Error()) {
			continue // no root or no AF_XDP here, said so
		}
		if m.Err != "" || m.Calls == 0 {
			t.Errorf("%+v: %d calls, %s", m.Point, m.Calls, m.Err)
		}
	}
	if !strings.Contains(stdout, "go run ./bench/cmd/charts") {
		t.Errorf("no word of the charts command:\n%s", stdout)
	}
	code, _, stderr = runBinary(t, nil, "bench", "--loop", "open")
	if code != 2 || !strings.Contains(stderr, "--rate") {
		t.Errorf("open loop without a rate: exit %d, %s", code, stderr)
	}
}

// TestBenchPeers runs a tiny fan-in sweep as users run it: the server and
// the peers' client processes apart, the server's memory read from /proc.
func TestBenchPeers(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	out := t.TempDir()
	code, stdout, stderr := runBinary(t, nil, "bench", "--peers", "1,5", "--client_procs", "2", "--loop", "open", "--rate", "1000",
		"--workloads", "echo", "--sizes", "64", "--protocols", "starwire-tcp", "--concurrency", "2",
		"--duration", "100ms", "--warmup", "10ms", "--out", out)
	if code != 0 {
		t.Fatalf("bench: exit %d: %s\n%s", code, stderr, stdout)
	}
	if !strings.Contains(stdout, "KiB/peer") {
		t.Errorf("stdout:\n%s", stdout)
	}
	f, err := os.Open(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := bench.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Measurements) != 2 {
		t.Fatalf("%d measurements, want 2", len(r.Measurements))
	}
	for _, m := range r.Measurements {
		if m.Err != "" || m.Calls == 0 || m.ServerRSS <= 0 || m.Peers == 0 {
			t.Errorf("%+v: %d calls, server RSS %d, %s", m.Point, m.Calls, m.ServerRSS, m.Err)
		}
	}
	code, _, stderr = runBinary(t, nil, "bench", "--peers", "10", "--rate", "100")
	if code != 2 || !strings.Contains(stderr, "--loop open") {
		t.Errorf("peers in a closed loop: exit %d, %s", code, stderr)
	}
}
