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
				c.cpu = func() time.Duration { return l.used }
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
