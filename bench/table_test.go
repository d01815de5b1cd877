package bench

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFormatTable(t *testing.T) {
	cfg := LoadConfig{Mode: ModeEcho, Size: 64, Inflight: 32, Duration: 2 * time.Second, Rounds: 4}
	rs := []Result{
		{Name: "starwire", Calls: 2_000_000, Elapsed: 2 * time.Second, P50: 25_400 * time.Nanosecond, P99: 80 * time.Microsecond, Bytes: 128_000_000},
		{Name: "grpc-go", Calls: 60_000, Elapsed: 2 * time.Second, P50: time.Millisecond, P99: 3 * time.Millisecond, Bytes: 3_840_000},
		{Name: "raw-tcp", Err: errors.New("connection refused")},
	}
	var sb strings.Builder
	if err := FormatTable(&sb, cfg, rs); err != nil {
		t.Fatal(err)
	}
	want := `echo, 64 B, 32 in flight, 2s per contender in 4 turns
  contender    calls      ops/s       p50       p99  MB/s  starwire ×
   starwire  2000000  1,000,000    25.4µs    80.0µs  64.0        1.00
    grpc-go    60000     30,000  1000.0µs  3000.0µs   1.9       33.33
    raw-tcp    error          -         -         -     -           -
raw-tcp: connection refused
`
	if got := sb.String(); got != want {
		t.Errorf("FormatTable wrote\n%s\nwant\n%s", got, want)
	}
}

func TestFormatTableWithoutStarwire(t *testing.T) {
	var sb strings.Builder
	rs := []Result{{Name: "grpc-go", Calls: 10, Elapsed: time.Second}}
	if err := FormatTable(&sb, DefaultLoad, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(sb.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[2], " -") {
		t.Errorf("table without a starwire row:\n%s", sb.String())
	}
}

func TestFormatTurns(t *testing.T) {
	rs := []Result{
		{Name: "starwire", TurnP50: []time.Duration{28_400 * time.Nanosecond, 121 * time.Microsecond}},
		{Name: "grpc-go", TurnP50: []time.Duration{time.Millisecond}}, // one turn: nothing to compare
		{Name: "raw-tcp", Err: errors.New("connection refused"), TurnP50: []time.Duration{1, 2}},
	}
	var sb strings.Builder
	if err := FormatTurns(&sb, rs); err != nil {
		t.Fatal(err)
	}
	if got, want := sb.String(), "turns p50 starwire: 28.4µs 121.0µs\n"; got != want {
		t.Errorf("FormatTurns wrote %q, want %q", got, want)
	}
}

func TestGroupThousands(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0"}, {7, "7"}, {999, "999"}, {1000, "1,000"}, {12345, "12,345"},
		{123456, "123,456"}, {1234567, "1,234,567"}, {-1234, "-1,234"}, {-999, "-999"},
	}
	for _, tt := range tests {
		if got := groupThousands(tt.n); got != tt.want {
			t.Errorf("groupThousands(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestResultRates(t *testing.T) {
	r := Result{Calls: 500, Elapsed: 250 * time.Millisecond, Bytes: 2_000_000}
	if got := r.OpsPerSec(); got != 2000 {
		t.Errorf("OpsPerSec = %v, want 2000", got)
	}
	if got := r.MBPerSec(); got != 8 {
		t.Errorf("MBPerSec = %v, want 8", got)
	}
	if (Result{Calls: 5}).OpsPerSec() != 0 || (Result{Bytes: 5}).MBPerSec() != 0 {
		t.Error("a result without elapsed time has a rate")
	}
}

func TestAddrs(t *testing.T) {
	tests := []struct {
		in      string
		want    Addrs
		wantErr bool
	}{
		{in: "starwire=127.0.0.1:1,grpc=127.0.0.1:2,raw=127.0.0.1:3", want: Addrs{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}},
		{in: " grpc=h:2 , starwire=h:1", want: Addrs{Starwire: "h:1", GRPC: "h:2"}},
		{in: "raw=[::1]:9", want: Addrs{Raw: "[::1]:9"}},
		{in: "", wantErr: true},
		{in: "starwire", wantErr: true},
		{in: "starwire=", wantErr: true},
		{in: "thrift=h:1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseAddrs(tt.in)
		if tt.wantErr {
			if !errors.Is(err, ErrAddrs) {
				t.Errorf("ParseAddrs(%q) error = %v, want ErrAddrs", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseAddrs(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		if back, err := ParseAddrs(got.String()); err != nil || back != got {
			t.Errorf("ParseAddrs(%q.String()) = %+v, %v", got, back, err)
		}
	}
}

func TestSamplesPercentile(t *testing.T) {
	s := NewSamples(1000)
	if s.Percentile(50) != 0 {
		t.Error("percentile of no samples is not 0")
	}
	for i := 100; i >= 1; i-- {
		s.Add(time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}} {
		if got := s.Percentile(c.p); got != c.want {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
}

func TestSamplesStaySpreadWhenFull(t *testing.T) {
	s := NewSamples(64)
	const n = 10_000
	for i := range n {
		s.Add(time.Duration(i))
	}
	if s.Count() != n {
		t.Fatalf("Count = %d, want %d", s.Count(), n)
	}
	if s.Len() > 64 || s.Len() < 32 {
		t.Fatalf("kept %d samples with room for 64", s.Len())
	}
	// Evenly spread over the run: the median is near the middle.
	if p50 := s.Percentile(50); p50 < n*4/10 || p50 > n*6/10 {
		t.Errorf("p50 = %v of values 0..%d", p50, n-1)
	}
	if p99 := s.Percentile(99); p99 < n*9/10 {
		t.Errorf("p99 = %v of values 0..%d", p99, n-1)
	}
}

func TestSamplesMerge(t *testing.T) {
	a, b := NewSamples(10), NewSamples(10)
	a.Add(1)
	b.Add(3)
	b.Add(2)
	a.Merge(b)
	if a.Count() != 3 || a.Len() != 3 || a.Percentile(100) != 3 || a.Percentile(1) != 1 {
		t.Errorf("merged samples: count %d len %d", a.Count(), a.Len())
	}
}
