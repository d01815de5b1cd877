package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func startServers(t *testing.T) *Servers {
	t.Helper()
	s, err := StartServers(Loopback)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRunLoad puts a bounded load on every contender and checks that each
// made exactly the calls asked for, with sane figures.
func TestRunLoad(t *testing.T) {
	s := startServers(t)
	tests := []LoadConfig{
		{Mode: ModeEcho, Size: 64, Inflight: 1, Calls: 200},
		{Mode: ModeEcho, Size: 64, Inflight: 8, Calls: 500},
		{Mode: ModeEcho, Size: 3, Inflight: 4, Calls: 100},
		{Mode: ModeFetch, Size: 1 << 20, Inflight: 1, Calls: 5},
		{Mode: ModeFetch, Size: 4 << 10, Inflight: 4, Calls: 50},
	}
	for _, cfg := range tests {
		cfg.Duration = 20 * time.Second // the call budget ends the run first
		cfg.Warmup = 10 * time.Millisecond
		cfg.Rounds = 3
		t.Run(cfg.Mode, func(t *testing.T) {
			rs := RunLoad(context.Background(), s.Addrs, cfg)
			if len(rs) != 3 {
				t.Fatalf("%d results, want 3", len(rs))
			}
			for _, r := range rs {
				if r.Err != nil {
					t.Fatalf("%s: %v", r.Name, r.Err)
				}
				if r.Calls != cfg.Calls {
					t.Errorf("%s made %d calls, want %d", r.Name, r.Calls, cfg.Calls)
				}
				if r.Bytes != cfg.Calls*int64(cfg.Size) {
					t.Errorf("%s moved %d bytes, want %d", r.Name, r.Bytes, cfg.Calls*int64(cfg.Size))
				}
				if r.P50 <= 0 || r.P99 < r.P50 || r.OpsPerSec() <= 0 {
					t.Errorf("%s: p50 %v p99 %v ops/s %v", r.Name, r.P50, r.P99, r.OpsPerSec())
				}
			}
			var sb strings.Builder
			if err := FormatTable(&sb, cfg, rs); err != nil || strings.Count(sb.String(), "\n") != 5 || strings.Contains(sb.String(), "error") {
				t.Errorf("table:\n%s", sb.String())
			}
		})
	}
}

func TestRunLoadStopsAtDeadline(t *testing.T) {
	s := startServers(t)
	cfg := LoadConfig{Mode: ModeEcho, Size: 64, Inflight: 4, Duration: 100 * time.Millisecond, Rounds: 4}
	start := time.Now()
	rs := RunLoad(context.Background(), Addrs{Starwire: s.Addrs.Starwire, Raw: s.Addrs.Raw}, cfg)
	// A run that missed its deadline would not return at all (its call
	// budget is unbounded), so the bound need only stand far above what a
	// loaded machine takes under the race detector (7.6 s has been seen).
	if el := time.Since(start); el > time.Minute {
		t.Errorf("two 100ms runs took %v", el)
	}
	if len(rs) != 2 || rs[0].Name != "starwire" || rs[1].Name != "raw-tcp" {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if r.Err != nil || r.Calls == 0 || r.Elapsed < 100*time.Millisecond {
			t.Errorf("%s: %d calls in %v, %v", r.Name, r.Calls, r.Elapsed, r.Err)
		}
		if len(r.TurnP50) != cfg.Rounds || slices.Min(r.TurnP50) <= 0 || slices.Max(r.TurnP50) < r.P50 || slices.Min(r.TurnP50) > r.P50 {
			t.Errorf("%s: p50 %v, by turn %v: want one positive p50 a turn, around the run's", r.Name, r.P50, r.TurnP50)
		}
	}
}

// TestCallLoopCallsOnceWhenLate: a caller the machine runs after its
// turn's deadline still makes one call, so that the turn has a p50.
func TestCallLoopCallsOnceWhenLate(t *testing.T) {
	var budget atomic.Int64
	budget.Store(100)
	lat := NewSamples(8)
	calls := 0
	n, err := callLoop(context.Background(), func(context.Context) error { calls++; return nil }, time.Now().Add(-time.Second), &budget, lat)
	if err != nil || n != 1 || calls != 1 || lat.Percentile(50) <= 0 {
		t.Errorf("past the deadline: %d calls (%d made), p50 %v, %v; want 1", n, calls, lat.Percentile(50), err)
	}
	budget.Store(0)
	calls = 0
	if n, _ := callLoop(context.Background(), func(context.Context) error { calls++; return nil }, time.Now().Add(time.Second), &budget, lat); n != 0 || calls != 0 {
		t.Errorf("with no budget: %d calls, want none", n)
	}
}

func TestRunLoadReportsErrors(t *testing.T) {
	s := startServers(t)
	bad := []LoadConfig{
		{Mode: "stream", Size: 64, Inflight: 1, Calls: 1, Duration: time.Second},
		{Mode: ModeEcho, Size: 64, Inflight: 0, Calls: 1, Duration: time.Second},
	}
	for _, cfg := range bad {
		for _, r := range RunLoad(context.Background(), s.Addrs, cfg) {
			if r.Err == nil {
				t.Errorf("%s accepted %+v", r.Name, cfg)
			}
		}
	}
	rs := RunLoad(context.Background(), s.Addrs, LoadConfig{Mode: "stream", Inflight: 1})
	if !errors.Is(rs[0].Err, ErrMode) {
		t.Errorf("unknown mode: %v, want ErrMode", rs[0].Err)
	}
	// Nobody listens on the raw server's address once it is closed.
	s.Raw.Close()
	rs = RunLoad(context.Background(), Addrs{Raw: s.Addrs.Raw}, LoadConfig{Mode: ModeEcho, Size: 8, Inflight: 1, Calls: 1, Duration: time.Second})
	if rs[0].Err == nil {
		t.Error("raw contender without a server reported no error")
	}
}
