package bench

import (
	"context"
	"flag"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/internal/writecount"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// figure is what one sub-benchmark measured, kept for the ratio report.
type figure struct {
	n        int     // b.N of the run
	ops      float64 // calls per second
	bytes    float64 // bytes per second
	p50, p99 time.Duration
	allocs   float64 // per call; -1 when unknown
	cpu      float64 // CPU ns per call, both ends; 0 when unknown
}

// figures collects a top-level benchmark's sub-benchmark results by name,
// one per repetition (-count runs each sub-benchmark that many times).
type figures struct {
	mu sync.Mutex
	m  map[string][]figure
}

// set records the figure of a run of b.N calls. The testing package calls a
// benchmark function with growing b.N until the run is long enough, and
// starts again at b.N = 1 for the next repetition: so a larger b.N than the
// last one replaces it, and anything else starts a new repetition.
func (f *figures) set(name string, v figure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string][]figure)
	}
	vs := f.m[name]
	if n := len(vs); n > 0 && v.n > vs[n-1].n {
		vs[n-1] = v
		return
	}
	f.m[name] = append(vs, v)
}

// field returns one field of every repetition of name; none when name was
// not measured (a filtered run), so that targets built from it are left out.
func (f *figures) field(name string, get func(figure) float64) []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var vs []float64
	for _, v := range f.m[name] {
		vs = append(vs, get(v))
	}
	return vs
}

func opsOf(f figure) float64    { return f.ops }
func bytesOf(f figure) float64  { return f.bytes }
func p50Of(f figure) float64    { return float64(f.p50) }
func allocsOf(f figure) float64 { return f.allocs }
func cpuOf(f figure) float64    { return f.cpu }

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
	io0 := readIOCounts()
	cpu0, cpuOK := cpuTime()
	writecount.Enable()
	w0, fr0 := writecount.Read()
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
	cpu1, cpuOK1 := cpuTime()
	io1 := readIOCounts()
	w1, fr1 := writecount.Read()
	runtime.ReadMemStats(&after)
	reportSyscalls(b, io0, io1)
	if w1 > w0 {
		// Frames per write is how well starwire batches; this process's
		// TCP connections only (both ends when the server runs here).
		b.ReportMetric(float64(fr1-fr0)/float64(w1-w0), "frames/write")
	}
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	all := NewSamples(2)
	all.Merge(lats...)
	f := reportLatency(b, all)
	f.allocs = float64(after.Mallocs-before.Mallocs) / float64(b.N)
	if cpuOK && cpuOK1 {
		f.cpu = reportCPU(b, cpu1-cpu0)
	}
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

// reportSyscalls reports the process's read and write system calls per call
// between two counts: both ends' when the server runs in this process.
func reportSyscalls(b *testing.B, before, after ioCounts) {
	if !before.ok || !after.ok {
		return
	}
	b.ReportMetric(float64(after.reads-before.reads)/float64(b.N), "rsys/op")
	b.ReportMetric(float64(after.writes-before.writes)/float64(b.N), "wsys/op")
}

// reportCPU reports CPU time per call (this process's and the server
// process's) and returns it in nanoseconds.
func reportCPU(b *testing.B, d time.Duration) float64 {
	v := float64(d) / float64(b.N)
	b.ReportMetric(v, "cpu-ns/op")
	return v
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
	f := figure{n: b.N, allocs: -1}
	if el := b.Elapsed(); el > 0 {
		f.ops = float64(b.N) / el.Seconds()
	}
	f.p50, f.p99 = lat.Percentile(50), lat.Percentile(99)
	b.ReportMetric(f.ops, "ops/s")
	b.ReportMetric(float64(f.p50), "p50-ns")
	b.ReportMetric(float64(f.p99), "p99-ns")
	return f
}

// A target is one of the goals, checked on ratios of figures from one run:
// one value per repetition, judged by their median.
type target struct {
	name     string
	measured []float64
	want     float64
	atMost   bool   // the measured figure must not exceed want
	unit     string // "×", "%" or "allocs"
	info     bool   // a diagnostic figure without a goal
}

// median returns the median of the measured values (NaN when none).
func (t target) median() float64 {
	vs := slices.Clone(t.measured)
	vs = slices.DeleteFunc(vs, math.IsNaN)
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

func (t target) pass() bool {
	m := t.median()
	switch {
	case t.unit == "allocs":
		// Whole allocations per call, as allocs/op counts them: the
		// fraction is the process's background allocation spread over
		// the calls.
		return math.Floor(m) <= t.want
	case t.atMost:
		return m <= t.want
	}
	return m >= t.want
}

func (t target) format(v float64) string {
	switch t.unit {
	case "%":
		return fmt.Sprintf("%.0f%%", 100*v)
	case "allocs":
		return fmt.Sprintf("%.2f allocs", v)
	}
	return fmt.Sprintf("%.2f×", v)
}

func (t target) String() string {
	m := t.median()
	line := fmt.Sprintf("%-52s %12s", t.name, t.format(m))
	if vs := slices.DeleteFunc(slices.Clone(t.measured), math.IsNaN); len(vs) > 1 {
		line += fmt.Sprintf(" (%s–%s over %d)", t.format(slices.Min(vs)), t.format(slices.Max(vs)), len(vs))
	}
	if t.info {
		return line
	}
	cmp, verdict := "≥", "pass"
	if t.atMost {
		cmp = "≤"
	}
	if !t.pass() {
		verdict = "MISS"
	}
	return fmt.Sprintf("%s  target %s %s: %s", line, cmp, t.format(t.want), verdict)
}

// logTargets prints the targets whose figures were measured. Benchmarks
// report them and never fail on them: on a shared machine a single run may
// be noisy, and a run with -benchtime=1x measures nothing.
func logTargets(ts []target) {
	var sb strings.Builder
	sb.WriteString("targets (ratios within this run, median of repetitions):\n")
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		sb.WriteString("  (-benchtime=1x: one call per figure, the ratios below mean nothing)\n")
	}
	n := 0
	for _, t := range ts {
		if !math.IsNaN(t.median()) {
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

// ratio pairs the i-th values of a and b (the i-th repetitions) and returns
// their quotients; NaN where b is zero.
func ratio(a, b []float64) []float64 {
	n := min(len(a), len(b))
	vs := make([]float64, n)
	for i := range n {
		vs[i] = math.NaN()
		if b[i] != 0 {
			vs[i] = a[i] / b[i]
		}
	}
	return vs
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
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
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

// echoCall returns a 64-byte starwire echo call that checks its answer.
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

// grpcEchoCall returns a 64-byte gRPC echo call.
func grpcEchoCall(c *GRPCClient) func() error {
	req := echoPayload(64)
	ctx := context.Background()
	return func() error {
		_, err := c.Echo(ctx, req)
		return err
	}
}
