package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/rpc"
)

// Load modes: what each call does.
const (
	ModeEcho  = "echo"  // send Size bytes, get a copy back
	ModeFetch = "fetch" // ask for Size bytes (a RecvTensor-shaped call)
)

// ErrMode is returned for an unknown LoadConfig.Mode.
var ErrMode = errors.New("bench: unknown load mode")

// LoadConfig says what load to put on each contender.
type LoadConfig struct {
	Mode     string        // ModeEcho or ModeFetch
	Size     int           // bytes per request (echo) or per answer (fetch)
	Inflight int           // calls in flight at once
	Calls    int64         // stop after this many calls; 0 means no bound
	Duration time.Duration // stop after this long
	Warmup   time.Duration // unmeasured calls first, to settle connections and pools
}

// DefaultLoad is a short echo run with 32 calls in flight.
var DefaultLoad = LoadConfig{Mode: ModeEcho, Size: 64, Inflight: 32, Duration: 2 * time.Second, Warmup: 200 * time.Millisecond}

// A Result is one contender's measurement.
type Result struct {
	Name     string
	Calls    int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	Bytes    int64 // payload bytes the answers carried
	Err      error
}

// OpsPerSec returns calls per second.
func (r Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Calls) / r.Elapsed.Seconds()
}

// MBPerSec returns the answers' payload in MB (10⁶ bytes) per second.
func (r Result) MBPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// RunLoad measures every contender in a (starwire, gRPC, raw TCP, in that
// order, one after another) under cfg.
func RunLoad(ctx context.Context, a Addrs, cfg LoadConfig) []Result {
	var rs []Result
	if a.Starwire != "" {
		rs = append(rs, measure("starwire", cfg, func() (loader, error) { return newStarwireLoader(a.Starwire, cfg) }))
	}
	if a.GRPC != "" {
		rs = append(rs, measure("grpc-go", cfg, func() (loader, error) { return newGRPCLoader(a.GRPC, cfg) }))
	}
	if a.Raw != "" {
		rs = append(rs, measure("raw-tcp", cfg, func() (loader, error) { return newRawLoader(a.Raw, cfg) }))
	}
	return rs
}

// A loader makes calls until a deadline or a call budget runs out.
type loader interface {
	// run makes calls until deadline or until budget is spent, recording
	// latencies in lat, and returns how many it made.
	run(ctx context.Context, deadline time.Time, budget *atomic.Int64, lat *Samples) (int64, error)
	close()
}

func measure(name string, cfg LoadConfig, open func() (loader, error)) Result {
	r := Result{Name: name}
	if cfg.Mode != ModeEcho && cfg.Mode != ModeFetch {
		r.Err = fmt.Errorf("bench: mode %q: %w", cfg.Mode, ErrMode)
		return r
	}
	if cfg.Inflight < 1 || cfg.Size < 0 {
		r.Err = fmt.Errorf("bench: %d in flight of %d bytes: invalid load", cfg.Inflight, cfg.Size)
		return r
	}
	l, err := open()
	if err != nil {
		r.Err = err
		return r
	}
	defer l.close()
	ctx := context.Background()
	if cfg.Warmup > 0 {
		var budget atomic.Int64
		budget.Store(1 << 62)
		if _, err := l.run(ctx, time.Now().Add(cfg.Warmup), &budget, NewSamples(2)); err != nil {
			r.Err = fmt.Errorf("bench: %s warm-up: %w", name, err)
			return r
		}
	}
	var budget atomic.Int64
	budget.Store(cfg.Calls)
	if cfg.Calls <= 0 {
		budget.Store(1 << 62)
	}
	lat := NewSamples(1 << 18)
	start := time.Now()
	r.Calls, r.Err = l.run(ctx, start.Add(cfg.Duration), &budget, lat)
	r.Elapsed = time.Since(start)
	r.Bytes = r.Calls * int64(cfg.Size)
	r.P50, r.P99 = lat.Percentile(50), lat.Percentile(99)
	return r
}

// callerLoader runs Inflight goroutines, each making one call at a time
// through its own caller function.
type callerLoader struct {
	callers []func(context.Context) error
	closer  func()
}

func (l *callerLoader) close() { l.closer() }

func (l *callerLoader) run(ctx context.Context, deadline time.Time, budget *atomic.Int64, lat *Samples) (int64, error) {
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		mu    sync.Mutex
		first error
	)
	samples := make([]*Samples, len(l.callers))
	for i, call := range l.callers {
		samples[i] = NewSamples(cap(lat.ns)/len(l.callers) + 2)
		wg.Add(1)
		go func(s *Samples) {
			defer wg.Done()
			n, err := callLoop(ctx, call, deadline, budget, s)
			total.Add(n)
			if err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
			}
		}(samples[i])
	}
	wg.Wait()
	lat.Merge(samples...)
	return total.Load(), first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func callLoop(ctx context.Context, call func(context.Context) error, deadline time.Time, budget *atomic.Int64, lat *Samples) (int64, error) {
	var n int64
	for budget.Add(-1) >= 0 {
		t0 := time.Now()
		if !t0.Before(deadline) {
			return n, nil
		}
		if err := call(ctx); err != nil {
			return n, err
		}
		lat.Add(time.Since(t0))
		n++
	}
	return n, nil
}

func newStarwireLoader(addr string, cfg LoadConfig) (loader, error) {
	c := rpc.NewClient(addr, rpc.ClientOptions{})
	l := &callerLoader{closer: func() { c.Close() }}
	for range cfg.Inflight {
		sc := NewStarwireClient(c)
		req, resp := echoPayload(cfg.Size), make([]byte, cfg.Size)
		dst := make([]byte, cfg.Size)
		if cfg.Mode == ModeEcho {
			l.callers = append(l.callers, func(ctx context.Context) error { return sc.Echo(ctx, req, resp) })
		} else {
			l.callers = append(l.callers, func(ctx context.Context) error { return sc.FetchInto(ctx, dst) })
		}
	}
	return l, nil
}

func newGRPCLoader(addr string, cfg LoadConfig) (loader, error) {
	c, err := DialGRPC(addr)
	if err != nil {
		return nil, err
	}
	l := &callerLoader{closer: func() { c.Close() }}
	for range cfg.Inflight {
		req := echoPayload(cfg.Size)
		if cfg.Mode == ModeEcho {
			l.callers = append(l.callers, func(ctx context.Context) error {
				_, err := c.Echo(ctx, req)
				return err
			})
		} else {
			l.callers = append(l.callers, func(ctx context.Context) error {
				_, err := c.Fetch(ctx, cfg.Size)
				return err
			})
		}
	}
	return l, nil
}

// rawLoader is the raw TCP baseline: echo with one call in flight is
// ping-pong, with more a pipeline on one connection; fetch uses one
// connection per call in flight.
type rawLoader struct {
	cfg   LoadConfig
	pipe  *RawPipeline
	calls callerLoader
}

func newRawLoader(addr string, cfg LoadConfig) (loader, error) {
	l := &rawLoader{cfg: cfg}
	var closers []func() error
	l.calls.closer = func() {
		for _, c := range closers {
			c()
		}
	}
	fail := func(err error) (loader, error) {
		l.close()
		return nil, err
	}
	switch {
	case cfg.Mode == ModeEcho && cfg.Inflight > 1:
		p, err := DialRawPipeline(addr)
		if err != nil {
			return fail(err)
		}
		l.pipe = p
		closers = append(closers, p.Close)
	case cfg.Mode == ModeEcho:
		e, err := DialRawEcho(addr)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, e.Close)
		req, resp := echoPayload(cfg.Size), make([]byte, cfg.Size)
		l.calls.callers = append(l.calls.callers, func(context.Context) error { return e.Echo(req, resp) })
	default:
		for range cfg.Inflight {
			f, err := DialRawFetch(addr)
			if err != nil {
				return fail(err)
			}
			closers = append(closers, f.Close)
			dst := make([]byte, cfg.Size)
			l.calls.callers = append(l.calls.callers, func(context.Context) error { return f.Fetch(dst) })
		}
	}
	return l, nil
}

func (l *rawLoader) close() { l.calls.close() }

// pipelineChunk is how many requests one pipeline run sends before the
// deadline and budget are checked again; draining the window between chunks
// costs one round trip in thousands of calls.
const pipelineChunk = 8192

func (l *rawLoader) run(ctx context.Context, deadline time.Time, budget *atomic.Int64, lat *Samples) (int64, error) {
	if l.pipe == nil {
		return l.calls.run(ctx, deadline, budget, lat)
	}
	var n int64
	for time.Now().Before(deadline) {
		k := min(budget.Add(-pipelineChunk)+pipelineChunk, pipelineChunk)
		if k <= 0 {
			break
		}
		if err := l.pipe.Run(int(k), l.cfg.Size, l.cfg.Inflight, lat); err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// echoPayload returns a request of n bytes with a recognisable pattern.
func echoPayload(n int) []byte {
	b := bytes.Repeat([]byte{0xA5}, n)
	FillPattern(b)
	return b
}
