package afxdprpc

import (
	"time"

	"github.com/starwire/starwire/internal/cpuclock"
)

// The margin a path must beat is the CPU it costs the job. A call's time
// does not show what the bypass's reactors spend polling after each call
// on CPUs the job's other work needs, so each size class measures, beside
// each path's time per call, the process's CPU per call while its calls
// take each path, and the bypass is taken only where the time it saves is
// worth the CPU it adds: where its time per call times its CPU ratio to
// TCP (CPU per call over the bypass over CPU per call over TCP) is below
// TCP's, less hysteresis.
//
// The CPU is the process's (getrusage), read where a class's path changes
// for a while: at its first call, when a probe burst starts and when it
// is judged. The windows so made alternate between the paths and lie side
// by side in time, so the job's other work falls on both alike; a window's
// CPU is divided by the answers the connection had in it. The clock is
// read about twice per probe burst, at most every probeMin calls.
const (
	// priorCPURatio stands for a class's ratio until both paths are
	// measured: what AF_XDP cost against TCP over veth
	// (docs/benchmarks-history.md, "Path choice measured alike").
	priorCPURatio = 2.0
	// maxCPURatio bounds the ratio: a bypass this many times faster than
	// TCP is taken whatever the CPU says.
	maxCPURatio = 5.0
	// hysteresis is the share of the other path's cost a path must come
	// under, beyond what CPU asks, to take a class.
	hysteresis = 0.9
	// minCPUWindows is the windows each path needs before its CPU counts.
	minCPUWindows = 2
	// cpuHalfLife bounds a path's CPU record: past it, older windows
	// count half, so that the ratio follows a job whose load changes.
	cpuHalfLife = 4096 // answers
)

// processCPU is the chooser's CPU clock: this process's CPU time.
func processCPU() time.Duration { return cpuclock.Self().Total() }

// cpuWindow is a class's CPU window open: since when (the process's CPU
// and the connection's answers then) and over which path.
type cpuWindow struct {
	open    bool
	path    uint8
	cpu     time.Duration
	answers uint64
}

// cpuRecord is the CPU a class's calls over one path used, decayed.
type cpuRecord struct {
	ns, answers float64
	windows     uint32
}

// openCPUWindow starts class k's CPU window over path.
func (c *chooser) openCPUWindow(k, path int) {
	c.window[k] = cpuWindow{open: true, path: uint8(path), cpu: c.cpu(), answers: c.answers}
}

// closeCPUWindow ends class k's CPU window, if one is open, and adds what
// it used to its path's record; it returns the clock's reading.
func (c *chooser) closeCPUWindow(k int) time.Duration {
	now := c.cpu()
	w := &c.window[k]
	if !w.open {
		return now
	}
	w.open = false
	n := c.answers - w.answers
	if n == 0 || now < w.cpu {
		return now
	}
	r := &c.cpuUsed[w.path][k]
	r.ns += float64(now - w.cpu)
	r.answers += float64(n)
	r.windows = min(r.windows+1, 1<<31)
	if r.answers > cpuHalfLife {
		r.ns, r.answers = r.ns/2, r.answers/2
	}
	return now
}

// switchCPUWindow ends class k's window and opens the next, over path,
// with one reading of the clock.
func (c *chooser) switchCPUWindow(k, path int) {
	now := c.closeCPUWindow(k)
	c.window[k] = cpuWindow{open: true, path: uint8(path), cpu: now, answers: c.answers}
}

// burstEnded starts class k's CPU window over its path once a probe burst
// is judged, the choice made again.
func (c *chooser) burstEnded(k int) { c.switchCPUWindow(k, b2i(c.bypass[k])) }

// cpuRatio returns class k's CPU per call over the bypass over that over
// TCP, bounded to [1, maxCPURatio], and whether both were measured (else
// it is priorCPURatio).
func (c *chooser) cpuRatio(k int) (float64, bool) {
	b, t := &c.cpuUsed[viaBypass][k], &c.cpuUsed[viaTCP][k]
	if b.windows < minCPUWindows || t.windows < minCPUWindows || b.ns <= 0 || t.ns <= 0 {
		return priorCPURatio, false
	}
	r := (b.ns / b.answers) / (t.ns / t.answers)
	return min(max(r, 1), maxCPURatio), true
}

// margin is how much cheaper than class k's chosen path the other must
// be to be taken: on TCP, the bypass must cost under hysteresis/ratio of
// TCP's time per call; on the bypass, TCP under hysteresis×ratio of its.
func (c *chooser) margin(k int) float64 {
	r, _ := c.cpuRatio(k)
	if c.bypass[k] {
		return hysteresis * r
	}
	return hysteresis / r
}
