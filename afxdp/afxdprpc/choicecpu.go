package afxdprpc

import (
	"bytes"
	"os"
	"sync"
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
	// idleSpell is how long the connection may have no call in flight
	// before the CPU windows open across it are dropped: the process's
	// CPU in such a spell is its other connections' and work's, not the
	// class's path's, and with several connections in one process it made
	// a class's ratio swing between 1 and 5.
	idleSpell = 50 * time.Millisecond
)

// processCPU is the chooser's CPU clock: this process's CPU time.
func processCPU() time.Duration { return cpuclock.Self().Total() }

// machineIdle is the chooser's idle clock: the CPU time the machine's
// CPUs, all together, have spent idle (/proc/stat), 0 where unreadable.
func machineIdle() time.Duration { return procStat.idle() }

// procStat keeps /proc/stat open, so that reading it allocates nothing.
var procStat statReader

type statReader struct {
	mu  sync.Mutex
	f   *os.File
	err error
	buf [512]byte
}

// idle parses the idle and iowait fields of /proc/stat's first line, in
// USER_HZ ticks (1/100 s on every Linux ABI Go supports).
func (r *statReader) idle() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil && r.err == nil {
		r.f, r.err = os.Open("/proc/stat")
	}
	if r.err != nil {
		return 0
	}
	n, _ := r.f.ReadAt(r.buf[:], 0)
	line := r.buf[:n]
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	var ticks int64
	for i, f := 0, 0; i < len(line) && f <= 5; f++ {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		var v int64
		for ; i < len(line) && line[i] != ' '; i++ {
			v = v*10 + int64(line[i]-'0')
		}
		if f == 4 || f == 5 { // "cpu user nice system idle iowait"
			ticks += v
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// cpuWindow is a class's CPU window open: since when (the process's CPU,
// the machine's idle CPU and the connection's answers then), over which
// path, and whether the connection sat idle for idleSpell since.
type cpuWindow struct {
	open    bool
	spoiled bool
	path    uint8
	cpu     time.Duration
	idle    time.Duration
	answers uint64
}

// cpuRecord is the CPU a class's calls over one path used, decayed, and
// the CPU the machine had idle meanwhile.
type cpuRecord struct {
	ns, idle, answers float64
	windows           uint32
}

// openCPUWindow starts class k's CPU window over path.
func (c *chooser) openCPUWindow(k, path int) {
	c.window[k] = cpuWindow{open: true, path: uint8(path), cpu: c.cpu(), idle: c.idle(), answers: c.answers}
}

// closeCPUWindow ends class k's CPU window, if one is open, and adds what
// it used to its path's record unless an idle spell spoiled it; it
// returns the clocks' readings.
func (c *chooser) closeCPUWindow(k int) (cpu, idle time.Duration) {
	now, idle := c.cpu(), c.idle()
	w := &c.window[k]
	if !w.open {
		return now, idle
	}
	w.open = false
	n := c.answers - w.answers
	if n == 0 || now < w.cpu || w.spoiled {
		c.traceWindow(k, w, n, now, false)
		return now, idle
	}
	c.traceWindow(k, w, n, now, true)
	_, known := c.cpuRatio(k)
	defer c.cpuMeasured(k, known)
	r := &c.cpuUsed[w.path][k]
	r.ns += float64(now - w.cpu)
	r.idle += float64(max(idle-w.idle, 0))
	r.answers += float64(n)
	r.windows = min(r.windows+1, 1<<31)
	if r.answers > cpuHalfLife {
		r.ns, r.idle, r.answers = r.ns/2, r.idle/2, r.answers/2
	}
	return now, idle
}

// cpuMeasured brings class k's next probe burst forward once its CPU
// ratio is first measured (known, before the window just closed): the
// bursts judged before held the class by the prior ratio's margin, and
// were spaced as if each had confirmed its path.
func (c *chooser) cpuMeasured(k int, known bool) {
	if _, now := c.cpuRatio(k); now && !known {
		c.probeGap[k] = probeMin
	}
}

// switchCPUWindow ends class k's window and opens the next, over path,
// with one reading of the clocks.
func (c *chooser) switchCPUWindow(k, path int) {
	now, idle := c.closeCPUWindow(k)
	c.window[k] = cpuWindow{open: true, path: uint8(path), cpu: now, idle: idle, answers: c.answers}
}

// sent notes, before a call at now is chosen, whether the connection had
// none in flight for idleSpell, and if so spoils the CPU windows open.
func (c *chooser) sent(now int64) {
	if c.inflight[viaTCP]+c.inflight[viaBypass] > 0 || now-c.idleFrom < int64(idleSpell) {
		return
	}
	for k := range c.window {
		c.window[k].spoiled = c.window[k].open
	}
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

// chargedRatio is the CPU ratio class k's margin charges: only the CPU
// the bypass adds beyond what the machine had idle while the class's
// calls went over TCP. Over TCP the process used P of CPU and the machine
// had I idle; the bypass uses r×P, adding (r-1)×P, of which up to I takes
// no CPU the job's other work used, so the bypass is charged
// P + max((r-1)×P - I, 0), a ratio of max(1, r - I/P). (I/P is the
// machine's idle share over the process's busy share, (1-m)×p/u with m
// the machine's busy fraction, p its CPUs and u the CPUs the process
// kept busy.) A busy machine, with no CPU idle, is charged the whole
// ratio.
func (c *chooser) chargedRatio(k int) float64 {
	r, measured := c.cpuRatio(k)
	if t := &c.cpuUsed[viaTCP][k]; measured && t.ns > 0 {
		r = max(1, r-t.idle/t.ns)
	}
	return r
}

// margin is how much cheaper than class k's chosen path the other must
// be to be taken: on TCP, the bypass must cost under hysteresis/ratio of
// TCP's time per call; on the bypass, TCP under hysteresis×ratio of its,
// the ratio charged (chargedRatio).
func (c *chooser) margin(k int) float64 {
	r := c.chargedRatio(k)
	if c.bypass[k] {
		return hysteresis * r
	}
	return hysteresis / r
}
