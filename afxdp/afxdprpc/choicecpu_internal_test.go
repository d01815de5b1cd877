package afxdprpc

import (
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/wire"
)

// cpuLink models one caller's calls over a link in fake time: each call
// takes its path's time, and the process's CPU clock advances by its
// path's CPU per call when it is answered.
type cpuLink struct {
	took [2]time.Duration // time per call, by path
	cpu  [2]time.Duration // CPU per call, by path
	used time.Duration    // the process's CPU clock
}

// run sends n calls of 64 bytes through c in turn and returns how many
// took the bypass.
func (l *cpuLink) run(c *chooser, first uint64, n int) (bypassed int) {
	for id := first; id < first+uint64(n); id++ {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
		path := b2i(c.choose(m, true))
		time.Sleep(l.took[path])
		l.used += l.cpu[path]
		c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: 64})
		if path == viaBypass {
			bypassed++
		}
	}
	return bypassed
}

// TestMarginFollowsMeasuredCPU: the margin AF_XDP must beat follows the
// ratio of CPU per call the chooser measures on each path, not a
// constant. With the bypass at 0.6× TCP's time per call, a bypass costing
// the same CPU as TCP is taken, one costing twice TCP's is not (its time
// saved is less than the CPU it adds), and one costing three times TCP's
// CPU is taken only once it is 4× faster; one taken by the prior ratio
// before the CPU was measured is left once it is. Time is fake: each call takes
// its path's time in a synctest bubble.
func TestMarginFollowsMeasuredCPU(t *testing.T) {
	const us = time.Microsecond
	for _, tt := range []struct {
		name     string
		ratio    float64       // the bypass's CPU per call over TCP's
		bypassT  time.Duration // the bypass's time per call, against TCP's 40µs
		wantPath bool          // the class ends on the bypass
	}{
		{"same CPU, 0.6x time", 1, 24 * us, true},
		{"2x CPU, 0.6x time", 2, 24 * us, false},
		{"3x CPU, 0.6x time", 3, 24 * us, false},
		{"3x CPU, 0.25x time", 3, 10 * us, true},
		// Taken at first, by the prior ratio; left once measured.
		{"4x CPU, 0.3x time", 4, 12 * us, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &cpuLink{took: [2]time.Duration{40 * us, tt.bypassT},
					cpu: [2]time.Duration{10 * us, time.Duration(tt.ratio * float64(10*us))}}
				c := newChooser(PathPolicy{})
				c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
				l.run(c, 1, 6000)
				r, measured := c.cpuRatio(0)
				if !measured || math.Abs(r-tt.ratio) > 0.1*tt.ratio {
					t.Fatalf("measured CPU ratio %.2f (measured %v), want %.2f", r, measured, tt.ratio)
				}
				want := hysteresis / tt.ratio
				if c.bypass[0] {
					want = hysteresis * tt.ratio
				}
				if m := c.margin(0); math.Abs(m-want) > 0.1*want {
					t.Errorf("margin %.3f, want %.3f from the measured ratio", m, want)
				}
				if c.bypass[0] != tt.wantPath {
					t.Fatalf("class on the bypass: %v, want %v", c.bypass[0], tt.wantPath)
				}
				got := float64(l.run(c, 6001, 2000)) / 2000
				if tt.wantPath && got < 0.9 || !tt.wantPath && got > 0.05 {
					t.Errorf("%.1f%% of the next calls over the bypass", 100*got)
				}
				if st := c.stats(); len(st.Classes) != 1 || st.Classes[0].CPURatio == 0 {
					t.Errorf("stats report no measured CPU ratio: %+v", st.Classes)
				}
			})
		})
	}
}

// TestMarginBeforeCPUIsMeasured: until both paths have CPU windows, the
// margin is the prior ratio's; a clock that stands still measures nothing.
func TestMarginBeforeCPUIsMeasured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newTestChooser(PathPolicy{})
		if r, measured := c.cpuRatio(0); measured || r != priorCPURatio {
			t.Fatalf("fresh chooser: ratio %.2f, measured %v", r, measured)
		}
		if got := c.margin(0); got != hysteresis/priorCPURatio {
			t.Fatalf("margin %.3f, want %.3f", got, hysteresis/priorCPURatio)
		}
		l := &cpuLink{took: [2]time.Duration{40 * time.Microsecond, 20 * time.Microsecond}}
		l.run(c, 1, 2000)
		if _, measured := c.cpuRatio(0); measured {
			t.Fatal("a clock that stands still measured a ratio")
		}
	})
}

// TestProcessCPUAllocatesNothing: the chooser reads the CPU clock on the
// call path, at each probe burst's start and judgment.
func TestProcessCPUAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { processCPU() }); n != 0 {
		t.Fatalf("processCPU allocates %v times", n)
	}
	a := processCPU()
	for i := 0; processCPU() == a && i < 1e7; i++ {
	}
	if b := processCPU(); b <= a {
		t.Fatalf("the process's CPU clock went from %v to %v while it spun", a, b)
	}
}

// queueLink models callers that keep depth calls in flight on one
// connection, in fake time: each path serves its calls in turn, svc each,
// and a call's answer arrives lat after its service ends, so a path's
// rate with calls queued is 1/svc and a lone call takes svc+lat. Each
// answer costs the process its path's CPU.
type queueLink struct {
	lat, svc [2]time.Duration
	cpu      [2]time.Duration // CPU per call, by path
	used     time.Duration    // the process's CPU clock
	busy     [2]time.Time     // when each path's service of its calls ends
}

// run makes n calls answered by 64 KiB tensors (and their metadata), depth in flight, and returns the
// share that took the bypass.
func (l *queueLink) run(c *chooser, first uint64, n, depth int) float64 {
	type call struct {
		id uint64
		at time.Time // its answer
	}
	var flight []call
	id, bypassed := first, 0
	send := func() {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 9, CallID: id}, Meta: make([]byte, 64)}
		p := b2i(c.choose(m, true))
		bypassed += p
		l.used += l.cpu[p]
		now := time.Now()
		if l.busy[p].Before(now) {
			l.busy[p] = now
		}
		l.busy[p] = l.busy[p].Add(l.svc[p])
		flight = append(flight, call{id, l.busy[p].Add(l.lat[p])})
		id++
	}
	for range depth {
		send()
	}
	for sent := depth; len(flight) > 0; {
		var cl call
		cl, flight = earliest(flight, func(c call) time.Time { return c.at })
		time.Sleep(time.Until(cl.at))
		c.answered(&wire.Header{Kind: wire.KindResponse, Method: 9, CallID: cl.id, PayloadLen: 64<<10 + 64})
		if sent < n {
			send()
			sent++
		}
	}
	return float64(bypassed) / float64(n)
}

// TestSlowBypassLeftAtDepth: a class of large calls with 8 in flight,
// sent over a bypass 4× slower than TCP at that depth and 4× TCP's CPU
// per call (as AF_XDP against TCP with 64 KiB answers over veth), goes
// back to TCP. Probed by one TCP call, TCP was judged by its lone latency
// (435µs) against the bypass's cost at depth (140µs a call) and looked
// slower than it is, even with the margin the CPU ratio gives: the class
// stayed on the slower path. Probed by as many calls as the bypass has in
// flight, TCP is measured at the same depth.
func TestSlowBypassLeftAtDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const us = time.Microsecond
		// TCP: 35µs a call with calls queued, alone 435µs, 10µs of CPU;
		// the bypass: 140µs a call, 40µs of CPU.
		l := &queueLink{lat: [2]time.Duration{400 * us, 400 * us}, svc: [2]time.Duration{35 * us, 140 * us},
			cpu: [2]time.Duration{10 * us, 40 * us}}
		c := newChooser(PathPolicy{})
		c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
		l.run(c, 1, 400, 8)
		k := classOf(64<<10 + 64) // from learnBelow up
		if c.bypass[k] {
			t.Fatal("the class took the bypass, 4x slower at depth 8")
		}
		c.mu.Lock()
		// A stall of TCP (all 8 in flight delayed at once) at a judged
		// probe: its last samples are the stalled calls', and the class
		// goes over the bypass.
		for range estimateWindow {
			c.est[viaTCP][k].add(float64(500 * us))
		}
		c.bypass[k], c.probeGap[k], c.sinceLog[k] = true, probeMin, 0
		c.mu.Unlock()
		l.run(c, 1000, 2000, 8)
		if c.bypass[k] {
			r, _ := c.cpuRatio(k)
			t.Fatalf("the class stayed on a bypass 4x slower than TCP at depth 8 (CPU ratio measured %.2f)", r)
		}
		if got := l.run(c, 5000, 4000, 8); got > 0.05 {
			t.Errorf("%.1f%% of calls over the slower bypass", 100*got)
		}
	})
}

// TestMeasuredCPUBringsProbeForward: a bypass 0.6x TCP's time at the
// same CPU is held off by the prior CPU ratio's margin until both paths'
// CPU is measured, two bursts in; those holds spaced the bursts as
// confirmations (96 then 192 calls), and the class took the bypass only
// after 300 calls. Measured, the next burst comes after probeMin.
func TestMeasuredCPUBringsProbeForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const us = time.Microsecond
		l := &cpuLink{took: [2]time.Duration{40 * us, 24 * us}, cpu: [2]time.Duration{10 * us, 10 * us}}
		c := newChooser(PathPolicy{})
		c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
		l.run(c, 1, 200)
		if !c.bypass[0] {
			t.Fatal("after 200 calls the class is still on TCP, 1.7x slower at the same CPU")
		}
	})
}

// TestCPUWindowsSkipIdleSpells: CPU the process spends while the
// connection has no call in flight (another connection's, another
// protocol's) is not charged to the class's path. Here the paths cost
// the same CPU per call, the bypass is faster, and every 200 calls the
// connection sits idle 100 ms while the process spends 20 ms elsewhere:
// charged to the bypass's window, it made the ratio 5 and sent the class
// back to TCP.
func TestCPUWindowsSkipIdleSpells(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const us = time.Microsecond
		l := &cpuLink{took: [2]time.Duration{40 * us, 24 * us}, cpu: [2]time.Duration{10 * us, 10 * us}}
		c := newChooser(PathPolicy{})
		c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
		id := uint64(1)
		worst, left := 0.0, 0
		for i := range 40 {
			l.run(c, id, 200)
			id += 200
			time.Sleep(100 * time.Millisecond)
			l.used += 20 * time.Millisecond
			if r, measured := c.cpuRatio(0); measured {
				worst = max(worst, r)
			}
			if i > 0 && !c.bypass[0] {
				left++
			}
		}
		if worst > 1.3 {
			t.Errorf("CPU ratio up to %.2f, want about 1: the idle spells' CPU was charged", worst)
		}
		if left > 0 {
			t.Errorf("the class was off the faster bypass, which costs the same CPU, at %d of 39 spells", left)
		}
	})
}

// TestMarginCountsOnlyCPUNotIdle: a bypass costing twice TCP's CPU per
// call at 0.6x its time is taken on a machine with CPU idle while calls
// go over TCP (the CPU it adds was idle), and not on a busy machine.
func TestMarginCountsOnlyCPUNotIdle(t *testing.T) {
	const us = time.Microsecond
	for _, tt := range []struct {
		name   string
		idle   bool
		want   bool
		charge float64
	}{{"idle machine", true, true, 1}, {"busy machine", false, false, 2}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &cpuLink{took: [2]time.Duration{40 * us, 24 * us}, cpu: [2]time.Duration{10 * us, 20 * us}}
				c := newChooser(PathPolicy{})
				start := time.Now()
				c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
				if tt.idle { // one CPU of the machine's idle throughout
					c.idle = func() time.Duration { return time.Since(start) }
				}
				l.run(c, 1, 6000)
				if r, measured := c.cpuRatio(0); !measured || math.Abs(r-2) > 0.2 {
					t.Fatalf("CPU ratio %.2f (measured %v), want 2", r, measured)
				}
				if got := c.chargedRatio(0); math.Abs(got-tt.charge) > 0.1 {
					t.Errorf("charged ratio %.2f, want %.2f", got, tt.charge)
				}
				if c.bypass[0] != tt.want {
					t.Fatalf("class on the bypass: %v, want %v", c.bypass[0], tt.want)
				}
			})
		})
	}
}

// TestStatReaderReadsIdle: /proc/stat's idle clock reads without
// allocating and advances while the process sleeps.
func TestStatReaderReadsIdle(t *testing.T) {
	a := machineIdle()
	if a <= 0 {
		t.Fatalf("machine idle %v", a)
	}
	if n := testing.AllocsPerRun(100, func() { machineIdle() }); n != 0 {
		t.Fatalf("machineIdle allocates %v times", n)
	}
}
