package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/rpc"
)

// figure is what one sub-benchmark measured, kept for the ratio report.
type figure struct {
	ops      float64 // calls per second
	bytes    float64 // bytes per second
	p50, p99 time.Duration
	allocs   float64 // per call; -1 when unknown
}

// figures collects a top-level benchmark's sub-benchmark results by name.
type figures struct {
	mu sync.Mutex
	m  map[string]figure
}

func (f *figures) set(name string, v figure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]figure)
	}
	f.m[name] = v
}

// field returns one field of a figure, or NaN when name was not measured
// (a filtered run), so that targets built from it are left out.
func (f *figures) field(name string, get func(figure) float64) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.m[name]
	if !ok {
		return math.NaN()
	}
	return get(v)
}

func opsOf(f figure) float64    { return f.ops }
func bytesOf(f figure) float64  { return f.bytes }
func p50Of(f figure) float64    { return float64(f.p50) }
func allocsOf(f figure) float64 { return f.allocs }

// warmCalls are made before the timer starts, so that connections, pools
// and the handler's paths are warm.
const warmCalls = 64

// sampleRoom bounds the latency samples kept per sub-benchmark.
const sampleRoom = 1 << 18

// runCalls runs b.N calls with inflight goroutines, each with its own call
// function from newCall, records per-call latency, reports ops/s, p50-ns and
// p99-ns, and returns the figure.
func runCalls(b *testing.B, inflight, warm int, newCall func() func() error) figure {
	b.Helper()
	calls := make([]func() error, inflight)
	for i := range calls {
		calls[i] = newCall()
	}
	for i := range warm {
		if err := calls[i%inflight](); err != nil {
			b.Fatalf("warm-up call: %v", err)
		}
	}
	lats := make([]*Samples, inflight)
	for i := range lats {
		lats[i] = NewSamples(sampleRoom/inflight + 2)
	}
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	b.ResetTimer()
	if inflight == 1 {
		callSeq(b.N, calls[0], lats[0], &failed)
	} else {
		var wg sync.WaitGroup
		for i := range inflight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				callShared(int64(b.N), &next, calls[i], lats[i], &failed)
			}()
		}
		wg.Wait()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := NewSamples(2)
	all.Merge(lats...)
	f := reportLatency(b, all)
	f.allocs = float64(after.Mallocs-before.Mallocs) / float64(b.N)
	return f
}

func callSeq(n int, call func() error, lat *Samples, failed *atomic.Pointer[error]) {
	for range n {
		t0 := time.Now()
		if err := call(); err != nil {
			recordFailure(failed, err)
			return
		}
		lat.Add(time.Since(t0))
	}
}

func callShared(n int64, next *atomic.Int64, call func() error, lat *Samples, failed *atomic.Pointer[error]) {
	for next.Add(1) <= n {
		t0 := time.Now()
		if err := call(); err != nil {
			recordFailure(failed, err)
			return
		}
		lat.Add(time.Since(t0))
	}
}

// recordFailure keeps the first error. It is a function of its own so that
// the error escapes to the heap only when there is one: taking the address
// of the loop's variable would cost an allocation per call.
func recordFailure(failed *atomic.Pointer[error], err error) {
	failed.CompareAndSwap(nil, &err)
}

// reportLatency reports ops/s, p50-ns and p99-ns from lat over the
// benchmark's elapsed time.
func reportLatency(b *testing.B, lat *Samples) figure {
	f := figure{allocs: -1}
	if el := b.Elapsed(); el > 0 {
		f.ops = float64(b.N) / el.Seconds()
	}
	f.p50, f.p99 = lat.Percentile(50), lat.Percentile(99)
	b.ReportMetric(f.ops, "ops/s")
	b.ReportMetric(float64(f.p50), "p50-ns")
	b.ReportMetric(float64(f.p99), "p99-ns")
	return f
}

// A target is one of the goals checked as a ratio of figures from one run.
type target struct {
	name     string
	measured float64
	want     float64
	atMost   bool   // the measured figure must not exceed want
	unit     string // "×", "%" or "allocs"
}

func (t target) pass() bool {
	if t.unit == "allocs" {
		// Whole allocations per call, as allocs/op counts them: the
		// fraction is the process's background allocation spread over
		// the calls.
		return math.Floor(t.measured) <= t.want
	}
	if t.atMost {
		return t.measured <= t.want
	}
	return t.measured >= t.want
}

func (t target) String() string {
	verdict := "pass"
	if !t.pass() {
		verdict = "MISS"
	}
	cmp := "≥"
	if t.atMost {
		cmp = "≤"
	}
	num := func(v float64) string {
		if t.unit == "%" {
			return fmt.Sprintf("%.0f%%", 100*v)
		}
		if t.unit == "allocs" {
			return fmt.Sprintf("%.2f allocs", v)
		}
		return fmt.Sprintf("%.2f×", v)
	}
	return fmt.Sprintf("%-44s %10s (target %s %s)  %s", t.name, num(t.measured), cmp, num(t.want), verdict)
}

// logTargets prints the targets whose figures were measured. Benchmarks report them and never fail on
// them: on a shared machine a single run may be noisy, and a run with
// -benchtime=1x measures nothing.
func logTargets(ts []target) {
	var sb strings.Builder
	sb.WriteString("targets (ratios within this run):\n")
	n := 0
	for _, t := range ts {
		if !math.IsNaN(t.measured) {
			sb.WriteString("  " + t.String() + "\n")
			n++
		}
	}
	if n == 0 {
		return
	}
	// Printed rather than logged: a parent benchmark's log shows only
	// with -v, and the targets are the point of the run.
	fmt.Print(sb.String())
}

// ratio is a/b; NaN when either is unknown or b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// startLoopback starts the three servers in this process for b and its
// sub-benchmarks.
func startLoopback(b *testing.B) *Servers {
	b.Helper()
	s, err := StartServers(Loopback)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// newRPCClient returns a client of addr closed when b ends.
func newRPCClient(b *testing.B, addr string) *rpc.Client {
	c := rpc.NewClient(addr, rpc.ClientOptions{})
	b.Cleanup(func() { c.Close() })
	return c
}

func newGRPCClient(b *testing.B, addr string) *GRPCClient {
	c, err := DialGRPC(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// echoContenders returns the call factories of the starwire and gRPC echo
// contenders for 64-byte payloads.
func echoCall(c *StarwireClient) func() error {
	req, resp := echoPayload(64), make([]byte, 64)
	ctx := context.Background()
	return func() error {
		if err := c.Echo(ctx, req, resp); err != nil {
			return err
		}
		if !slices.Equal(req, resp) {
			return fmt.Errorf("starwire echo answered %x", resp)
		}
		return nil
	}
}

func grpcEchoCall(c *GRPCClient) func() error {
	req := echoPayload(64)
	ctx := context.Background()
	return func() error {
		_, err := c.Echo(ctx, req)
		return err
	}
}
