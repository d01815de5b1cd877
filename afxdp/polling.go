package afxdp

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Busy polling (Options.Busy) gives a reactor a core; on a host with few
// cores that core is taken from the op kernels, handlers and co-located
// tasks, which then wait for it. So every reactor that asks to spin or to
// be pinned goes through planPolling when it starts, which grants spinning
// only while CPUs are left for work: at most one fewer spinning reactors
// than the CPUs this process may run on (its affinity mask and GOMAXPROCS,
// whichever is smaller) and the CPUs no other spinning reactor on the host
// holds. Each spinning reactor holds one CPU, never shared with another
// spinning reactor of this or any other starwire process (a lock file per
// CPU, see hostCPUs); a pinned one runs on it. A reactor refused is demoted
// to adaptive polling (Options.Spin), and the first refusal is logged with
// its reason. Once running, a spinning reactor that finds goroutines
// waiting for a CPU stops spinning for that idle spell (pollClaim.backOff),
// as an adaptive one would, so its own process's work runs.

// cpuState is what planPolling decides from.
type cpuState struct {
	Allowed    []int // the CPUs of the process's affinity mask, ascending
	GOMAXPROCS int
	Spinning   int   // spinning reactors this process runs already
	Taken      []int // CPUs held by spinning reactors, this process's and other processes'
}

// pollRequest is what a reactor's options ask for.
type pollRequest struct {
	Busy, Pin bool
	CPU       int // for Pin: an index into the allowed CPUs, modulo their number
}

// pollPlan is what a reactor gets.
type pollPlan struct {
	Busy bool
	Pin  bool
	// CPU is the CPU a pinned reactor runs on and a spinning one holds; -1
	// when the reactor neither spins nor is pinned.
	CPU int
	// Why says what was capped and why; empty when the request was granted
	// as asked.
	Why string
}

// planPolling decides whether a reactor asking for r may spin and where it
// runs, from s alone.
func planPolling(s cpuState, r pollRequest) pollPlan {
	p := pollPlan{Busy: r.Busy, Pin: r.Pin, CPU: -1}
	if (!r.Busy && !r.Pin) || len(s.Allowed) == 0 {
		if r.Pin {
			p.Pin, p.Why = false, "no CPU in the affinity mask to pin to"
		}
		return p
	}
	procs := min(len(s.Allowed), max(s.GOMAXPROCS, 1))
	var free []int
	for _, c := range s.Allowed {
		if !slices.Contains(s.Taken, c) {
			free = append(free, c)
		}
	}
	wanted := s.Allowed[modulo(r.CPU, len(s.Allowed))]
	if r.Busy {
		switch {
		case s.Spinning+1 > procs-1:
			p.Busy = false
			p.Why = fmt.Sprintf("busy polling off: %d spinning reactor(s) already, and this process may run on %d CPU(s) (affinity %v, GOMAXPROCS %d), one of which is kept for work",
				s.Spinning, procs, s.Allowed, s.GOMAXPROCS)
		case len(free) < 2:
			p.Busy = false
			p.Why = fmt.Sprintf("busy polling off: spinning reactors hold CPUs %v of the %v this process may run on, leaving %d for work",
				sorted(s.Taken), s.Allowed, len(free))
		default:
			p.CPU = free[0]
			if r.Pin && slices.Contains(free, wanted) {
				p.CPU = wanted
			} else if r.Pin {
				p.Why = fmt.Sprintf("pinned to CPU %d instead of %d, which another spinning reactor holds", p.CPU, wanted)
			}
			return p
		}
	}
	if r.Pin {
		// A reactor that does not spin may share a CPU with work, but not
		// with a reactor that spins.
		p.CPU = wanted
		if !slices.Contains(free, wanted) {
			if len(free) == 0 {
				p.Pin, p.CPU = false, -1
				p.Why = join(p.Why, "not pinned: spinning reactors hold every CPU")
			} else {
				p.CPU = free[0]
				p.Why = join(p.Why, fmt.Sprintf("pinned to CPU %d instead of %d, which a spinning reactor holds", p.CPU, wanted))
			}
		}
	}
	return p
}

func modulo(i, n int) int { return ((i % n) + n) % n }

func sorted(s []int) []int { return slices.Sorted(slices.Values(s)) }

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// spinners is this process's record of its spinning reactors.
var spinners struct {
	mu     sync.Mutex
	held   map[int]*os.File // CPU → its lock file, held while the reactor spins
	logged bool
	dir    string // the lock files' directory; empty: hostSpinDir
}

// hostSpinDir holds one lock file per CPU; a spinning reactor holds an
// exclusive flock on its CPU's, which the kernel drops with the process.
func hostSpinDir() string {
	if spinners.dir != "" {
		return spinners.dir
	}
	return filepath.Join(os.TempDir(), "starwire-spin")
}

// pollClaim is what a reactor holds of the plan: its CPU's lock, and the
// state of its back-off.
type pollClaim struct {
	cpu       int // -1: holds none
	lastPoll  time.Time
	nextCheck time.Time
	until     time.Time // backing off until then
	sample    []metrics.Sample
}

// claimPolling plans o's polling against the process and host, takes the
// spinning reactor's CPU and returns the options the reactor runs with.
func claimPolling(o Options) (Options, *pollClaim) {
	c := &pollClaim{cpu: -1}
	if !o.Busy && !o.Pin {
		return o, c
	}
	spinners.mu.Lock()
	defer spinners.mu.Unlock()
	if spinners.held == nil {
		spinners.held = make(map[int]*os.File)
	}
	s := cpuState{Allowed: allowedCPUs(), GOMAXPROCS: runtime.GOMAXPROCS(0), Spinning: len(spinners.held)}
	var p pollPlan
	for range len(s.Allowed) + 1 {
		s.Taken = takenCPUs(s.Allowed)
		p = planPolling(s, pollRequest{Busy: o.Busy, Pin: o.Pin, CPU: o.CPU})
		if !p.Busy {
			break
		}
		f, ok := lockCPU(p.CPU)
		if ok {
			spinners.held[p.CPU], c.cpu = f, p.CPU
			c.sample = []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
			break
		}
		// Another process took it since takenCPUs looked: plan again.
	}
	if p.Busy && c.cpu < 0 {
		p.Busy, p.Why = false, "busy polling off: no CPU could be claimed"
	}
	o.Busy, o.Pin, o.CPU = p.Busy, p.Pin, p.CPU
	if p.Why != "" && !spinners.logged {
		spinners.logged = true
		slog.Warn("afxdp: reactor polling capped", "why", p.Why)
	}
	return o, c
}

// Spinning reports whether e's reactor busy-polls: Options.Busy as the
// process's CPU plan granted it (a reactor refused a CPU polls adaptively
// instead). A spinning reactor keeps a Go processor (P) busy for good,
// where an adaptive one parks and frees its P when idle.
func (e *Endpoint) Spinning() bool { return e.opts.Busy }

// release gives the reactor's CPU back.
func (c *pollClaim) release() {
	if c.cpu < 0 {
		return
	}
	spinners.mu.Lock()
	defer spinners.mu.Unlock()
	if f := spinners.held[c.cpu]; f != nil {
		f.Close() // drops the flock
	}
	delete(spinners.held, c.cpu)
	c.cpu = -1
}

// A spinning reactor backs off, sleeping as an adaptive one does, for
// pollBackOff once it sees that work waits for a CPU: goroutines of this
// process waiting to run (read at most once per pollCheckEvery, so the
// read stays off most polls), or a gap of more than pollGap between two of
// its idle polls, which a loop that only yields takes when other goroutines ran in between
// or the kernel gave the CPU to another thread.
const (
	pollCheckEvery = 20 * time.Microsecond
	pollGap        = 50 * time.Microsecond
	pollBackOff    = 2 * time.Millisecond
)

// backOff reports whether an idle spinning reactor should sleep rather
// than poll again; idleAt is when its idle spell began.
func (c *pollClaim) backOff(now, idleAt time.Time) bool {
	if c.sample == nil {
		return false
	}
	gap := now.Sub(c.lastPoll)
	c.lastPoll = now
	switch {
	case now.Before(c.until):
		return true
	case now != idleAt && gap > pollGap:
		c.until = now.Add(pollBackOff)
		return true
	case now.Before(c.nextCheck):
		return false
	}
	c.nextCheck = now.Add(pollCheckEvery)
	metrics.Read(c.sample)
	if v := c.sample[0].Value; v.Kind() == metrics.KindUint64 && v.Uint64() > 0 {
		c.until = now.Add(pollBackOff)
		return true
	}
	return false
}

// allowedCPUs returns the CPUs of the calling thread's affinity mask.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		out := make([]int, runtime.NumCPU())
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for c := 0; c < len(set)*64 && len(out) < set.Count(); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// takenCPUs returns the CPUs of allowed whose lock another spinning
// reactor holds, in this process or another.
func takenCPUs(allowed []int) []int {
	var out []int
	for _, c := range allowed {
		if _, mine := spinners.held[c]; mine {
			out = append(out, c)
			continue
		}
		f, ok := lockCPU(c)
		if !ok {
			out = append(out, c)
			continue
		}
		if f != nil {
			f.Close()
		}
	}
	return out
}

// lockCPU takes cpu's lock file without waiting. Without a usable
// directory it succeeds with a nil file: the process then counts its own
// reactors only.
func lockCPU(cpu int) (*os.File, bool) {
	dir := hostSpinDir()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("cpu%d", cpu)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, true
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
