package bench

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/starwire/starwire/internal/cpuclock"
)

// Sliced measurement (SweepConfig.Slices): the protocols of one setting
// (workload, size, calls in flight, cores) are connected at once and take
// turns in short slices, round after round, the order rotating, so that a
// change in the machine's load falls on all of them alike; each slice's
// rate is kept (Measurement.SliceRates), and the ratio of two protocols'
// rates slice by slice is steadier than that of two whole points measured
// one after the other, on a machine shared with other work whose load
// changes from one second to the next (docs/benchmarks-history.md, "Path
// choice measured alike").

// slicer is one protocol's connection in a sliced measurement.
type slicer struct {
	m       Measurement
	c       conn
	callers []caller
	pc      pathCounter
	before  [2]uint64
	server  int
	hist    *hdrhistogram.Histogram
	cpu     time.Duration
	cpuOK   bool
}

// measureSliced measures points ps, one setting's protocols, in turns.
func measureSliced(ctx context.Context, ps []Point, addrs map[string]string, cfg SweepConfig, xnet *xdpNet, unavailable map[string]error) []Measurement {
	cs := make([]*slicer, len(ps))
	for i, p := range ps {
		cs[i] = &slicer{m: Measurement{Point: p}, cpuOK: true}
		if err := unavailable[p.Protocol]; err != nil {
			cs[i].m.Err = err.Error()
			continue
		}
		pid := addrs[PIDKey]
		if overVeth(p.Protocol) {
			pid = addrs[xdpPIDKey]
		}
		cs[i].open(ctx, addrs[p.Protocol], pid, cfg, xnet)
		if cs[i].c != nil {
			defer cs[i].c.Close()
		}
	}
	slice := cfg.Duration / time.Duration(cfg.Slices)
	for round := range cfg.Slices {
		for k := range cs {
			c := cs[(k+round)%len(cs)]
			if c.m.Err != "" || c.c == nil || ctx.Err() != nil {
				continue
			}
			c.slice(ctx, slice)
		}
	}
	out := make([]Measurement, len(cs))
	for i, c := range cs {
		c.finish()
		out[i] = c.m
	}
	return out
}

// open connects, makes the callers and warms them up.
func (c *slicer) open(ctx context.Context, addr, pid string, cfg SweepConfig, xnet *xdpNet) {
	p := c.m.Point
	var err error
	if overVeth(p.Protocol) {
		c.c, err = xnet.dial(p.Protocol, addr)
	} else {
		c.c, err = dial(p.Protocol, addr)
	}
	if err != nil {
		c.m.Err = err.Error()
		return
	}
	c.callers = make([]caller, p.Concurrency)
	for i := range c.callers {
		if c.callers[i], err = c.c.caller(p.Workload, p.Size); err != nil {
			c.m.Err = err.Error()
			return
		}
	}
	if cfg.Warmup > 0 {
		if r := driveClosed(ctx, c.callers, cfg.Warmup); r.firstErr != nil {
			c.m.Err = "warm-up: " + r.firstErr.Error()
			return
		}
	}
	c.pc, _ = c.c.(pathCounter)
	if c.pc != nil {
		var open bool
		if c.before[0], c.before[1], open = awaitPacketPath(ctx, c.callers, c.pc, cfg.Warmup); !open {
			c.m.Err = "the packet path did not open during the warm-up"
			return
		}
	}
	c.server, _ = strconv.Atoi(pid)
	if c.server == os.Getpid() {
		c.server = 0
	}
	c.hist = hdrhistogram.New(histMin, histMax, histDigits)
}

// slice drives the slicer's callers for d and adds what they did.
func (c *slicer) slice(ctx context.Context, d time.Duration) {
	cpu0, err0 := cpuclock.SelfAnd(c.server)
	r := driveClosed(ctx, c.callers, d)
	cpu1, err1 := cpuclock.SelfAnd(c.server)
	c.cpuOK = c.cpuOK && err0 == nil && err1 == nil
	c.cpu += cpu1.Sub(cpu0).Total()
	c.m.Calls += r.calls
	c.m.Errors += r.errors
	c.m.Seconds += r.elapsed.Seconds()
	c.hist.Merge(r.hist)
	c.m.SliceRates = append(c.m.SliceRates, float64(r.calls)/max(r.elapsed.Seconds(), 1e-9))
	if r.firstErr != nil && c.m.Err == "" {
		c.m.Err = r.firstErr.Error()
	}
}

// finish fills the measurement's figures from the slices'.
func (c *slicer) finish() {
	m := &c.m
	if c.hist == nil || m.Seconds == 0 {
		return
	}
	m.CallsPerSec = float64(m.Calls) / m.Seconds
	m.MBPerSec = float64(m.Calls*payload(m.Workload, m.Size)) / 1e6 / m.Seconds
	us := func(q float64) float64 { return float64(c.hist.ValueAtQuantile(q)) / 1e3 }
	m.P50, m.P90, m.P99, m.P999 = us(50), us(90), us(99), us(99.9)
	m.Max = float64(c.hist.Max()) / 1e3
	if c.cpuOK && m.Calls > 0 {
		m.CPUPerCall = float64(c.cpu) / 1e3 / float64(m.Calls)
	}
	if c.pc != nil {
		tcp, bypass, _ := c.pc.pathCalls()
		tcp, bypass = tcp-c.before[0], bypass-c.before[1]
		m.AFXDPShare = float64(bypass) / float64(max(tcp+bypass, 1))
	}
}
