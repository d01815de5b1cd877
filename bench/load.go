package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
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
	// Rounds cuts Duration into turns that the contenders take one after
	// another; 0 means 1.
	Rounds int
	// CallTimeout, when positive, gives each starwire and gRPC-Go call a
	// context of its own with this timeout, as callers that bound every
	// call do; the raw baseline has no contexts.
	CallTimeout time.Duration
}

// DefaultLoad is a short echo run with 32 calls in flight, 3 seconds per
// contender in 6 turns.
var DefaultLoad = LoadConfig{Mode: ModeEcho, Size: 64, Inflight: 32, Duration: 3 * time.Second, Warmup: 200 * time.Millisecond, Rounds: 6}

// A Result is one contender's measurement.
type Result struct {
	Name     string
	Calls    int64
	Elapsed  time.Duration
	P50, P99 time.Duration
	TurnP50  []time.Duration // p50 of each turn, in order
	Bytes    int64           // payload bytes the answers carried
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

// RunLoad measures every contender in a (starwire, gRPC-Go, raw TCP) under
// cfg. The measuring time is cut into cfg.Rounds rounds in which the
// contenders take turns, so that a change in the machine's other load
// touches them all alike and their ratios stay meaningful.
func RunLoad(ctx context.Context, a Addrs, cfg LoadConfig) []Result {
	var cs []*contender
	add := func(name, addr string, open func(string, LoadConfig) (loader, error)) {
		if addr != "" {
			cs = append(cs, newContender(name, cfg, func() (loader, error) { return open(addr, cfg) }))
		}
	}
	add("starwire", a.Starwire, newStarwireLoader)
	add("grpc-go", a.GRPC, newGRPCLoader)
	add("raw-tcp", a.Raw, newRawLoader)
	defer func() {
		for _, c := range cs {
			if c.l != nil {
				c.l.close()
			}
		}
	}()
	rounds := max(cfg.Rounds, 1)
	for range rounds {
		for _, c := range cs {
			if ctx.Err() == nil {
				c.round(ctx, cfg.Duration/time.Duration(rounds))
			}
		}
	}
	rs := make([]Result, len(cs))
	for i, c := range cs {
		rs[i] = c.result(cfg)
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

// contender is one contender's loader and what it measured so far.
type contender struct {
	r      Result
	l      loader
	budget atomic.Int64
	lat    *Samples
}

// newContender checks cfg, opens the loader and warms it up; a failure is
// kept in the result.
func newContender(name string, cfg LoadConfig, open func() (loader, error)) *contender {
	c := &contender{r: Result{Name: name}, lat: NewSamples(1 << 18)}
	c.budget.Store(cfg.Calls)
	if cfg.Calls <= 0 {
		c.budget.Store(1 << 62)
	}
	if cfg.Mode != ModeEcho && cfg.Mode != ModeFetch {
		c.r.Err = fmt.Errorf("bench: mode %q: %w", cfg.Mode, ErrMode)
		return c
	}
	if cfg.Inflight < 1 || cfg.Size < 0 {
		c.r.Err = fmt.Errorf("bench: %d in flight of %d bytes: invalid load", cfg.Inflight, cfg.Size)
		return c
	}
	if c.l, c.r.Err = open(); c.r.Err != nil {
		return c
	}
	if cfg.Warmup > 0 {
		var budget atomic.Int64
		budget.Store(1 << 62)
		if _, err := c.l.run(context.Background(), time.Now().Add(cfg.Warmup), &budget, NewSamples(2)); err != nil {
			c.r.Err = fmt.Errorf("bench: %s warm-up: %w", name, err)
		}
	}
	return c
}

// round measures for d, unless the contender has failed or spent its
// budget.
func (c *contender) round(ctx context.Context, d time.Duration) {
	if c.r.Err != nil || c.budget.Load() <= 0 {
		return
	}
	turn := NewSamples(turnSamples)
	start := time.Now()
	n, err := c.l.run(ctx, start.Add(d), &c.budget, turn)
	c.r.Elapsed += time.Since(start)
	c.r.Calls += n
	c.r.Err = err
	c.r.TurnP50 = append(c.r.TurnP50, turn.Percentile(50))
	c.lat.Merge(turn)
}

// turnSamples is how many latencies one turn keeps (spread over the turn
// however long it is; see Samples).
const turnSamples = 1 << 16

func (c *contender) result(cfg LoadConfig) Result {
	r := c.r
	r.Bytes = r.Calls * int64(cfg.Size)
	r.P50, r.P99 = c.lat.Percentile(50), c.lat.Percentile(99)
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
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}(samples[i])
	}
	wg.Wait()
	lat.Merge(samples...)
	return total.Load(), first
}

// callLoop calls until deadline or until budget is spent, and at least
// once however late a loaded machine runs it, so that every turn of every
// caller measures something (as driveClosed does for a sweep's points).
func callLoop(ctx context.Context, call func(context.Context) error, deadline time.Time, budget *atomic.Int64, lat *Samples) (int64, error) {
	var n int64
	for budget.Add(-1) >= 0 {
		t0 := time.Now()
		if n > 0 && !t0.Before(deadline) {
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
	c := rpc.NewClient(addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
	l := &callerLoader{closer: func() { c.Close() }}
	for range cfg.Inflight {
		sc := NewStarwireClient(c)
		req, resp := echoPayload(cfg.Size), make([]byte, cfg.Size)
		dst := make([]byte, cfg.Size)
		if cfg.Mode == ModeEcho {
			l.callers = append(l.callers, withTimeout(cfg.CallTimeout, func(ctx context.Context) error { return sc.Echo(ctx, req, resp) }))
		} else {
			l.callers = append(l.callers, withTimeout(cfg.CallTimeout, func(ctx context.Context) error { return sc.FetchInto(ctx, dst) }))
		}
	}
	return l, nil
}

// withTimeout makes call under a context of its own that ends after d, if
// d is positive.
func withTimeout(d time.Duration, call func(context.Context) error) func(context.Context) error {
	if d <= 0 {
		return call
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return call(ctx)
	}
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
			l.callers = append(l.callers, withTimeout(cfg.CallTimeout, func(ctx context.Context) error {
				_, err := c.Echo(ctx, req)
				return err
			}))
		} else {
			l.callers = append(l.callers, withTimeout(cfg.CallTimeout, func(ctx context.Context) error {
				_, err := c.Fetch(ctx, cfg.Size)
				return err
			}))
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
