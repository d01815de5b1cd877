package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A tiny sweep in this process: every runnable point measures calls, the
// unavailable protocol is reported, and the table and JSON come out
// readable (package chart tests the charts).
func TestSweep(t *testing.T) {
	var progress []int
	cfg := SweepConfig{
		Protocols:   []string{ProtoGRPC, ProtoTCP, ProtoUDP, ProtoAFXDP},
		Workloads:   []Workload{WorkEcho, WorkRecvTensor, WorkFuse, WorkPSMix},
		Sizes:       map[Workload][]int{WorkEcho: {64, 1024}, WorkRecvTensor: {4096, 65536}, WorkFuse: {4096}, WorkPSMix: {4096}},
		Concurrency: []int{1, 4},
		Loop:        LoopClosed,
		Duration:    30 * time.Millisecond,
		Warmup:      5 * time.Millisecond,
		Progress:    func(done, total int, _ Point) { progress = append(progress, done) },
	}
	ms, err := RunSweep(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(cfg.points()); len(ms) != want {
		t.Fatalf("%d measurements, want %d", len(ms), want)
	}
	if progress[len(progress)-1] != len(ms) {
		t.Errorf("progress ended at %d of %d", progress[len(progress)-1], len(ms))
	}
	requireXDP := os.Getenv("STARWIRE_REQUIRE_AFXDP") == "1"
	for _, m := range ms {
		switch {
		case m.Protocol == ProtoAFXDP && strings.Contains(m.Err, ErrUnavailable.Error()) && !requireXDP:
			// No root or no AF_XDP here: said so, and the sweep went on.
		case m.Protocol == ProtoGRPC && m.Workload == WorkFuse:
			if m.Err == "" {
				t.Errorf("%+v: no error for an unavailable combination", m.Point)
			}
		case m.Err != "":
			t.Errorf("%+v: %s", m.Point, m.Err)
		case m.Calls == 0 || m.P50 <= 0 || m.P99 < m.P50 || m.Max < m.P99 || m.MBPerSec <= 0:
			t.Errorf("%+v: implausible %+v", m.Point, m)
		}
	}
	r := &Report{Date: "2026-01-01", Command: "test", Measurements: ms}
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "starwire-tcp") || !strings.Contains(table.String(), "×") {
		t.Errorf("table:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(&js)
	if err != nil || len(back.Measurements) != len(ms) || !reflect.DeepEqual(back.Measurements[3], ms[3]) {
		t.Fatalf("JSON round trip: %v", err)
	}
}

// An open loop counts latency from when each call was due: with a server
// answering one call at a time in 2ms and arrivals every 1ms, calls
// queue, every call due is still made, and the p99 shows the queue, not
// the 2ms service time. Time is the subject, so it runs on synctest's
// clock: the service time is exact, and a loaded machine can neither
// shrink the queue nor lengthen the closed loop's calls.
func TestOpenLoopShowsQueueing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const service = 2 * time.Millisecond
		slow := func(ctx context.Context) error { time.Sleep(service); return nil } // the service time, on synctest's clock
		r := driveOpen(context.Background(), []caller{slow}, 200*time.Millisecond, 1000)
		if r.calls != 200 || r.elapsed < 200*service {
			t.Fatalf("%d calls in %v, want the 200 due in 200ms, taking %v", r.calls, r.elapsed, 200*service)
		}
		// The last call was due at 199ms and answered at 400ms.
		open := time.Duration(r.hist.ValueAtQuantile(99))
		if open < 150*time.Millisecond {
			t.Errorf("open loop p99 %v, want the queue's growth (about 200ms)", open)
		}
		// A closed loop waits for each answer, so no queue builds: its
		// p99 is the service time.
		c := driveClosed(context.Background(), []caller{slow}, 100*time.Millisecond)
		if closed := time.Duration(c.hist.ValueAtQuantile(99)); closed > 2*service {
			t.Errorf("closed loop p99 %v, want the service time (%v)", closed, service)
		}
		t.Logf("open loop p99 %v over %v; closed loop p99 %v", open, r.elapsed, time.Duration(c.hist.ValueAtQuantile(99)))
	})
}

func TestSweepConfigErrors(t *testing.T) {
	for _, cfg := range []SweepConfig{
		{Protocols: []string{ProtoTCP}, Workloads: []Workload{WorkEcho}, Concurrency: []int{1}, Loop: "sideways", Duration: time.Second},
		{Protocols: []string{ProtoTCP}, Workloads: []Workload{WorkEcho}, Concurrency: []int{1}, Loop: LoopOpen, Duration: time.Second},
		{Protocols: []string{ProtoTCP}, Workloads: []Workload{WorkEcho}, Concurrency: []int{0}, Loop: LoopClosed, Duration: time.Second},
		{Workloads: []Workload{WorkEcho}, Concurrency: []int{1}, Loop: LoopClosed, Duration: time.Second},
	} {
		if _, err := RunSweep(context.Background(), cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
	if err := Available("carrier-pigeon"); err == nil || errors.Is(err, ErrUnavailable) {
		t.Errorf("Available(carrier-pigeon) = %v, want an unknown protocol", err)
	}
	if _, err := ServeTargets([]string{ProtoAFXDP}, 0); err == nil {
		t.Error("ServeTargets served AF_XDP on loopback")
	}
	for _, s := range []string{"64", "64B", "4KiB", "16MiB", "4K"} {
		n, err := ParseSize(s)
		if err != nil || n <= 0 {
			t.Errorf("ParseSize(%q) = %d, %v", s, n, err)
		}
	}
	if _, err := ParseSize("lots"); err == nil {
		t.Error("ParseSize(lots): no error")
	}
}

// TestSlicedSweep: with Slices, a setting's protocols are measured in turns
// (each point has a rate per slice, and its totals are theirs), and the
// dual contenders carry their calls over the paths their policies say
// (as root: they run over a veth pair).
func TestSlicedSweep(t *testing.T) {
	protos := []string{ProtoTCP, ProtoUDP}
	if os.Geteuid() == 0 {
		protos = append(protos, DualProtocols...)
	}
	cfg := SweepConfig{
		Protocols:   protos,
		Workloads:   []Workload{WorkRecvTensor},
		Sizes:       map[Workload][]int{WorkRecvTensor: {4096}},
		Concurrency: []int{2},
		Loop:        LoopClosed,
		Duration:    80 * time.Millisecond,
		Warmup:      20 * time.Millisecond,
		Slices:      4,
	}
	ms, err := RunSweep(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(protos) {
		t.Fatalf("%d measurements, want %d", len(ms), len(protos))
	}
	for _, m := range ms {
		if m.Err != "" {
			t.Errorf("%s: %s", m.Protocol, m.Err)
			continue
		}
		var sum float64
		for _, r := range m.SliceRates {
			sum += r
		}
		if len(m.SliceRates) != cfg.Slices || m.Calls == 0 || sum <= 0 || m.P50 <= 0 {
			t.Errorf("%s: %d slice rates %v, %d calls, p50 %v", m.Protocol, len(m.SliceRates), m.SliceRates, m.Calls, m.P50)
		}
		switch m.Protocol {
		case ProtoDualTCP:
			if m.AFXDPShare != 0 {
				t.Errorf("%s: %.2f of its calls over AF_XDP, want none", m.Protocol, m.AFXDPShare)
			}
		case ProtoDualAFXDP:
			if m.AFXDPShare != 1 {
				t.Errorf("%s: %.2f of its calls over AF_XDP, want all", m.Protocol, m.AFXDPShare)
			}
		}
	}
	if err := (&SweepConfig{Protocols: protos, Workloads: cfg.Workloads, Concurrency: cfg.Concurrency, Loop: LoopOpen, Rate: 10, Duration: time.Second, Slices: 2}).check(); err == nil {
		t.Error("slices with an open loop accepted")
	}
}
