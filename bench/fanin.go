package bench

import (
	"context"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/internal/cpuclock"
	"github.com/starwire/starwire/rpc"
)

// A fan-in sweep (SweepConfig.Peers) measures a server under many peers:
// each point opens Peers client connections, spread over a few client
// processes, which together issue calls at the sweep's rate (open loop),
// and reads the server process's resident memory during the point. Each
// point gets a fresh server process, so that its memory is that of the
// point's peers.

// PIDKey is the key of a server process's id among the addresses a
// Spawner returns (FormatAddrs writes it like a protocol's address), so
// that a sweep can read the server's memory.
const PIDKey = "pid"

// DefaultClientProcs is how many client processes a fan-in point spreads
// its peers over, at most.
const DefaultClientProcs = 4

// A PeersSpec is one client process's share of a fan-in point. Start,
// when set, is when the measured window begins: the process connects and
// warms up before it, then waits for it, so that all client processes
// measure the window the server's CPU is read over.
type PeersSpec struct {
	Protocol string        `json:"protocol"`
	Addr     string        `json:"addr"`
	Workload Workload      `json:"workload"`
	Size     int           `json:"size"`
	Start    time.Time     `json:"start,omitzero"`
	Peers    int           `json:"peers"`   // connections this process opens
	Callers  int           `json:"callers"` // callers on each connection
	Rate     float64       `json:"rate"`    // calls/s this process issues, in all
	Duration time.Duration `json:"duration"`
	Warmup   time.Duration `json:"warmup"`
	// Netns and Bind, for ProtoAFXDP: the network namespace (by name) the
	// process's endpoint opens its socket in, and the address it binds
	// there (see peersEndpoint).
	Netns string `json:"netns,omitempty"`
	Bind  string `json:"bind,omitempty"`
}

// A PeersResult is what a client process measured of its share.
type PeersResult struct {
	Warmup  int64                   `json:"warmup_calls"` // calls made before the measurement
	Calls   int64                   `json:"calls"`
	Errors  int64                   `json:"errors"`
	Seconds float64                 `json:"seconds"`
	Hist    *hdrhistogram.Snapshot  `json:"hist,omitempty"` // latencies in ns
	Late    *hdrhistogram.Snapshot  `json:"late,omitempty"` // wake-up lateness in ns (see driveResult.late)
	Err     string                  `json:"error,omitempty"`
	Behind  time.Duration           `json:"behind,omitempty"` // how long after spec.Start the window began
	hist    *hdrhistogram.Histogram // in this process
	late    *hdrhistogram.Histogram
}

// A ClientRunner runs a share of a fan-in point somewhere (another
// process, or this one) and returns what it measured.
type ClientRunner func(ctx context.Context, spec PeersSpec) PeersResult

// RunPeers opens spec.Peers connections with spec.Callers callers each,
// warms each caller up with a call or more, then issues calls at spec.Rate
// for spec.Duration on all of them (open loop).
func RunPeers(ctx context.Context, spec PeersSpec) PeersResult {
	var r PeersResult
	conns := make([]conn, 0, spec.Peers)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var callers []caller
	dial := dial
	if spec.Protocol == ProtoUDP || spec.Protocol == ProtoAFXDP {
		// The peers of a client process are sessions of one endpoint, as
		// a worker's are: an endpoint (a socket and a reactor) for each
		// made 250 of them in one process, whose reactors the client
		// could not run (1,000 peers: 437 of 2,000 calls/s).
		ep, err := peersEndpoint(spec)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		defer ep.Close()
		dial = func(_, addr string) (conn, error) {
			return &starConn{c: rpc.NewClient(addr, rpc.ClientOptions{Transport: afxdprpc.Transport(ep)})}, nil
		}
	}
	for range spec.Peers {
		c, err := dial(spec.Protocol, spec.Addr)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		conns = append(conns, c)
		for range max(spec.Callers, 1) {
			call, err := c.caller(spec.Workload, spec.Size)
			if err != nil {
				r.Err = err.Error()
				return r
			}
			callers = append(callers, call)
		}
	}
	w := driveClosed(ctx, callers, spec.Warmup)
	r.Warmup = w.calls
	if w.firstErr != nil {
		r.Err = "warm-up: " + w.firstErr.Error()
		return r
	}
	if !spec.Start.IsZero() {
		if err := waitUntil(ctx, spec.Start); err != nil {
			r.Err = err.Error()
			return r
		}
		r.Behind = max(time.Since(spec.Start), 0)
	}
	d := driveOpen(ctx, callers, spec.Duration, spec.Rate)
	r.Calls, r.Errors, r.Seconds = d.calls, d.errors, d.elapsed.Seconds()
	if d.firstErr != nil {
		r.Err = d.firstErr.Error()
	}
	r.hist, r.late = d.hist, d.late
	r.Hist, r.Late = d.hist.Export(), d.late.Export()
	return r
}

// shares splits a fan-in point over at most procs client processes.
func shares(p Point, cfg SweepConfig, addr string) []PeersSpec {
	procs := cfg.ClientProcs
	if procs <= 0 {
		procs = DefaultClientProcs
	}
	n := min(procs, p.Peers)
	callers := max(1, (p.Concurrency+p.Peers-1)/p.Peers)
	specs := make([]PeersSpec, n)
	for i := range specs {
		peers := p.Peers / n
		if i < p.Peers%n {
			peers++
		}
		specs[i] = PeersSpec{Protocol: p.Protocol, Addr: addr, Workload: p.Workload, Size: p.Size, Peers: peers, Callers: callers,
			Rate: p.Rate * float64(peers) / float64(p.Peers), Duration: cfg.Duration, Warmup: cfg.Warmup}
	}
	return specs
}

// measurePeers runs a fan-in point against the fresh server at addr,
// whose process is pid (0: unknown) with baseRSS resident before it.
func measurePeers(ctx context.Context, p Point, addr string, cfg SweepConfig, pid int, baseRSS int64) Measurement {
	m := Measurement{Point: p, ServerRSSBase: baseRSS}
	run := cfg.Clients
	if run == nil {
		run = RunPeers
	}
	specs := shares(p, cfg, addr)
	var win chan time.Duration
	if pid > 0 {
		stress.ResetHWM(pid)
		start := time.Now().Add(setupTime(cfg, specs))
		for i := range specs {
			specs[i].Start = start
		}
		win = make(chan time.Duration, 1)
		go func() { win <- windowCPU(ctx, pid, start, cfg.Duration) }()
	}
	rs := make([]PeersResult, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i] = run(ctx, s)
		}()
	}
	wg.Wait()
	h, late := hdrhistogram.New(histMin, histMax, histDigits), hdrhistogram.New(histMin, histMax, histDigits)
	var behind time.Duration
	for _, r := range rs {
		behind = max(behind, r.Behind)
		m.Calls += r.Calls
		m.Errors += r.Errors
		m.Seconds = max(m.Seconds, r.Seconds)
		if r.Err != "" && m.Err == "" {
			m.Err = r.Err
		}
		switch {
		case r.hist != nil:
			h.Merge(r.hist)
		case r.Hist != nil:
			h.Merge(hdrhistogram.Import(r.Hist))
		}
		switch {
		case r.late != nil:
			late.Merge(r.late)
		case r.Late != nil:
			late.Merge(hdrhistogram.Import(r.Late))
		}
	}
	if pid > 0 {
		// A window that some client began late, or whose calls ran past
		// its end, holds fewer of the calls counted than it should: no
		// figure rather than a wrong one.
		inWindow := behind <= cfg.Duration/20 && m.Seconds <= 1.05*cfg.Duration.Seconds()
		if cpu := <-win; cpu > 0 && m.Calls > 0 && inWindow {
			m.ServerCPUPerCall = float64(cpu) / 1e3 / float64(m.Calls)
		}
		if mem, err := stress.ReadMem(pid); err == nil {
			m.ServerRSS = mem.HWM
			if baseRSS > 0 {
				m.RSSPerPeer = float64(mem.HWM-baseRSS) / float64(p.Peers)
			}
		}
	}
	if m.Seconds > 0 {
		m.CallsPerSec = float64(m.Calls) / m.Seconds
		m.MBPerSec = float64(m.Calls*payload(p.Workload, p.Size)) / 1e6 / m.Seconds
	}
	us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1e3 }
	m.P50, m.P90, m.P99, m.P999 = us(50), us(90), us(99), us(99.9)
	m.Max = float64(h.Max()) / 1e3
	m.LateP50, m.LateP99 = float64(late.ValueAtQuantile(50))/1e3, float64(late.ValueAtQuantile(99))/1e3
	return m
}

// setupTime is how long a fan-in point's client processes get to start,
// connect their peers and warm up before the measured window begins.
func setupTime(cfg SweepConfig, specs []PeersSpec) time.Duration {
	most := 0
	for _, s := range specs {
		most = max(most, s.Peers)
	}
	return 200*time.Millisecond + 2*cfg.Warmup + time.Duration(most)*2*time.Millisecond
}

// windowCPU is the CPU time process pid uses from start for d, 0 if it
// cannot be read: the server's cost of the measured calls alone, without
// connecting the peers, warming up or closing.
func windowCPU(ctx context.Context, pid int, start time.Time, d time.Duration) time.Duration {
	if waitUntil(ctx, start) != nil {
		return 0
	}
	cpu0, err0 := cpuclock.Scheduled(pid)
	if waitUntil(ctx, start.Add(d)) != nil {
		return 0
	}
	cpu1, err1 := cpuclock.Scheduled(pid)
	if err0 != nil || err1 != nil || cpu1 < cpu0 {
		return 0
	}
	return cpu1 - cpu0
}

// waitUntil waits until t or ctx's end.
func waitUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// spawnedPID reads the process id a Spawner put among addrs, 0 if none.
func spawnedPID(addrs map[string]string) int {
	pid, _ := strconv.Atoi(addrs[PIDKey])
	return pid
}

// peersPoints lists a fan-in sweep's points in the order they run: for
// each cores value, peers value and protocol, each workload, size and
// calls in flight.
func (c *SweepConfig) peersPoints() []Point {
	var ps []Point
	for _, cores := range c.Cores {
		for _, peers := range c.Peers {
			for _, proto := range c.Protocols {
				for _, w := range c.Workloads {
					sizes := c.Sizes[w]
					if len(sizes) == 0 {
						sizes = DefaultSizes[w]
					}
					for _, size := range sizes {
						for _, conc := range c.Concurrency {
							callers := peers * max(1, (conc+peers-1)/peers)
							ps = append(ps, Point{Protocol: proto, Workload: w, Size: size, Concurrency: callers,
								Cores: cores, Loop: c.Loop, Rate: c.Rate, Peers: peers})
						}
					}
				}
			}
		}
	}
	return ps
}

// runPeersSweep measures a fan-in sweep's points, each against a fresh
// server process, so that what the server holds is that point's peers'.
func runPeersSweep(ctx context.Context, cfg SweepConfig, spawn Spawner) ([]Measurement, error) {
	points := cfg.peersPoints()
	var xnets peersNets
	defer xnets.Close()
	var out []Measurement
	for i, p := range points {
		if cfg.Progress != nil {
			cfg.Progress(i, len(points), p)
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		req, pcfg, err := xnets.point(p, cfg)
		if err != nil {
			out = append(out, Measurement{Point: p, Err: err.Error()})
			continue
		}
		addrs, stop, err := spawn(ctx, req)
		if err != nil {
			return out, err
		}
		pid := spawnedPID(addrs)
		var base int64
		if pid > 0 {
			if mem, err := stress.ReadMem(pid); err == nil {
				base = mem.RSS
			}
		}
		out = append(out, measurePeers(ctx, p, addrs[p.Protocol], pcfg, pid, base))
		stop()
	}
	if cfg.Progress != nil {
		cfg.Progress(len(points), len(points), Point{})
	}
	return out, nil
}

// ownPID is the process id InProcess reports for its servers.
var ownPID = strconv.Itoa(os.Getpid())
