package afxdprpc

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/wire"
)

func TestClassOf(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int
	}{{0, 0}, {64, 0}, {65, 1}, {128, 1}, {129, 2}, {64 << 10, 10}, {16 << 20, 18}, {1 << 30, 18}} {
		if got := classOf(c.n); got != c.want {
			t.Errorf("classOf(%d) = %d, want %d", c.n, got, c.want)
		}
		if k := classOf(c.n); k > 0 && k < numClasses-1 && (c.n < classBound(k) || classOf(classBound(k)) != k) {
			t.Errorf("classBound(%d) = %d does not bound %d", k, classBound(k), c.n)
		}
	}
}

// call runs one call of req request bytes and ans answer bytes through c,
// taking ns, and returns whether it went over the bypass.
func (c *chooser) call(id uint64, req, ans int64, ns int64) bool {
	m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, req)}
	bypass := c.choose(m, true)
	c.mu.Lock()
	c.slots[id%inflightSlots].sent -= ns // as if sent ns earlier
	c.mu.Unlock()
	c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: uint64(ans)})
	return bypass
}

// TestChooserAuto: with the bypass 3× faster for small calls and TCP 4×
// faster for 1 MiB answers, auto mode learns both, routes by the expected
// answer size, moves the crossover, and keeps probing the slower path
// rarely.
func TestChooserAuto(t *testing.T) {
	c := newTestChooser(PathPolicy{})
	cost := func(bypass bool, size int64) int64 {
		if size <= 1024 {
			return map[bool]int64{true: 10_000, false: 30_000}[bypass]
		}
		return map[bool]int64{true: 4_000_000, false: 1_000_000}[bypass]
	}
	var id uint64
	run := func(req, ans int64, n int) (bypassed int) {
		for range n {
			id++
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, req)}
			b := c.choose(m, true)
			c.mu.Lock()
			c.slots[id%inflightSlots].sent -= cost(b, max(req, ans))
			c.mu.Unlock()
			c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: uint64(ans)})
			if b {
				bypassed++
			}
		}
		return bypassed
	}
	if got := run(64, 64, 1000); got < 900 {
		t.Fatalf("%d of 1000 small calls over the bypass", got)
	}
	// A method whose answers are 1 MiB: the answer's size decides.
	run(64, 1<<20, 10) // learn it
	if got := run(64, 1<<20, 1000); got > 100 {
		t.Fatalf("%d of 1000 calls with 1 MiB answers over the bypass, which is 4x slower for them", got)
	}
	st := c.stats()
	if st.Crossover <= 64 || st.Crossover > 1<<20 {
		t.Fatalf("crossover %d, want within (64, 1MiB]", st.Crossover)
	}
	if st.TCPCalls+st.AFXDPCalls != 2010 || st.AFXDPCalls < 900 || st.TCPCalls < 900 {
		t.Fatalf("stats %+v", st)
	}
	// The probes back off: of another 1000 calls at most ~1000/probeMin+few
	// go to the slower path.
	if got := run(64, 1<<20, 1000); got > 1000/probeMin+minSamples {
		t.Fatalf("%d probes in 1000 calls", got)
	}
	// The link changes (a zero-copy NIC's driver came up): bulk over the
	// bypass is now faster, and the probes find it.
	cost = func(bypass bool, size int64) int64 { return map[bool]int64{true: 400_000, false: 1_000_000}[bypass] }
	run(64, 1<<20, 4*probeMax)
	if got := run(64, 1<<20, 100); got < 90 {
		t.Fatalf("%d of 100 bulk calls over the bypass once it measured faster", got)
	}
}

func TestChooserPolicies(t *testing.T) {
	for _, tt := range []struct {
		p                 PathPolicy
		small, large      bool
		crossover         int64
		closedSmallBypass bool
	}{
		{PathPolicy{Mode: PathThreshold, Threshold: 4096}, true, false, 4096, false},
		{PathPolicy{Mode: PathAFXDP}, true, true, -1, false},
		{PathPolicy{Mode: PathTCPOnly}, false, false, 0, false},
	} {
		c := newTestChooser(tt.p)
		if got := c.call(1, 100, 100, 1); got != tt.small {
			t.Errorf("%v: small call bypass %v", tt.p, got)
		}
		if got := c.call(2, 1<<20, 0, 1); got != tt.large {
			t.Errorf("%v: large call bypass %v", tt.p, got)
		}
		if got := c.crossover(); got != tt.crossover {
			t.Errorf("%v: crossover %d, want %d", tt.p, got, tt.crossover)
		}
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 3}}
		if c.choose(m, false) {
			t.Errorf("%v: bypass chosen with none open", tt.p)
		}
	}
}

func TestDescribeClasses(t *testing.T) {
	var on [numClasses]bool
	if got := describeClasses(on); got != "none" {
		t.Errorf("none set: %q", got)
	}
	on[0], on[1] = true, true
	if got := describeClasses(on); got != "size≤128B" {
		t.Errorf("none set: %q", got)
	}
	on[0], on[1], on[2], on[5] = false, true, true, true
	if got := describeClasses(on); got != "64B<size≤256B, 1KiB<size≤2KiB" {
		t.Errorf("%q", got)
	}
	for k := range on {
		on[k] = k >= 10
	}
	if got := describeClasses(on); got != "32KiB<size" {
		t.Errorf("%q", got)
	}
	for k := range on {
		on[k] = true
	}
	if got := describeClasses(on); got != "all" {
		t.Errorf("%q", got)
	}
}

// TestProbesOfASlowPathAreRare: once a probe finds the other path several
// times slower, probing costs the class about probeBudget of its time,
// not the doubling's first dozens of probes; a path slightly slower is
// still probed as the doubling spaces it. (1 MiB calls probe one at a
// time, not in bursts.)
func TestProbesOfASlowPathAreRare(t *testing.T) {
	for _, tt := range []struct {
		name      string
		slow      int64 // the bypass's cost a 1 MiB call, against TCP's 1,000,000 ns
		maxProbes int
	}{
		// 4× slower: probes at calls 16, 316, 916, 1940 and 2964, where
		// the doubling alone made 7 (16, 48, 112, ... 2032).
		{"4x", 4_000_000, 5},
		// 1.05× slower: the budget alone would allow a probe every 5
		// calls; the doubling spaces them 16, 32, ... 1024.
		{"1.05x", 1_050_000, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestChooser(PathPolicy{})
			var id uint64
			probes := 0
			meta := make([]byte, 1<<20)
			for range 3000 {
				id++
				m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: meta}
				b := c.choose(m, true)
				cost := int64(1_000_000)
				if b {
					cost, probes = tt.slow, probes+1
				}
				c.mu.Lock()
				c.slots[id%inflightSlots].sent -= cost
				c.mu.Unlock()
				c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id})
			}
			if probes == 0 || probes > tt.maxProbes {
				t.Fatalf("%d probes over the bypass in 3000 calls, want 1..%d", probes, tt.maxProbes)
			}
			if c.bypass[classOf(1<<20)] {
				t.Fatal("the class took the slower bypass")
			}
		})
	}
	if g := confirmedGap(16, 0/1.0, 1); g != 32 {
		t.Errorf("a zero ratio gives gap %d, want the doubling's 32", g)
	}
}

// TestChooserMeasuresBothPathsWarm: a path's call costs more when the call
// before it took the other path (its reactors asleep, its reader parked),
// as on a veth where AF_XDP carries small calls 5× faster than TCP once
// awake but a lone AF_XDP call after TCP ones pays its wake-ups. The
// chooser probes in bursts, so the bypass is judged awake as TCP is, and
// the class moves to it; judged by lone calls it stayed on TCP.
func TestChooserMeasuresBothPathsWarm(t *testing.T) {
	cost := map[bool][2]int64{ // [warm, cold] ns
		false: {40_000, 45_000},
		true:  {8_000, 60_000},
	}
	for _, depth := range []int{1, 8} {
		c := newTestChooser(PathPolicy{})
		var id uint64
		last := false
		bypassed := 0
		for range 2000 / depth {
			// depth calls in flight at once, answered in turn.
			ids := make([]uint64, depth)
			took := make([]bool, depth)
			for i := range ids {
				id++
				ids[i] = id
				m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
				took[i] = c.choose(m, true)
			}
			for i, id := range ids {
				ns := cost[took[i]][1]
				if took[i] == last {
					ns = cost[took[i]][0]
				}
				last = took[i]
				if took[i] {
					bypassed++
				}
				c.mu.Lock()
				c.slots[id%inflightSlots].sent -= ns * int64(depth)
				c.mu.Unlock()
				c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: 64})
			}
		}
		if share := float64(bypassed) / 2000; share < 0.9 {
			t.Errorf("%d in flight: %.1f%% of calls over the bypass, which is 5x faster awake; want >= 90%%", depth, 100*share)
		}
		if !c.bypass[0] {
			t.Errorf("%d in flight: the 64 B class ended on TCP", depth)
		}
	}
}

// TestChooserStallDoesNotFlip: with 8 calls in flight over TCP, the faster
// path here, a stall that delays all eight at once (a CPU taken for a
// while) does not send the class over the slower bypass on the strength
// of the bypass's older estimate: the class changes path only when a
// probe burst is judged.
func TestChooserStallDoesNotFlip(t *testing.T) {
	const depth = 8
	cost := map[bool]int64{false: 10_000, true: 16_000} // ns per call
	c := newTestChooser(PathPolicy{})
	var id uint64
	bypassed, total := 0, 0
	for round := range 4000 / depth {
		ids := make([]uint64, depth)
		took := make([]bool, depth)
		for i := range ids {
			id++
			ids[i] = id
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
			took[i] = c.choose(m, true)
		}
		stall := round%40 == 39 // every 320 calls, a round of calls 10x slower
		for i, id := range ids {
			ns := cost[took[i]] * depth
			if stall {
				ns *= 10
			}
			if took[i] {
				bypassed++
			}
			total++
			c.mu.Lock()
			c.slots[id%inflightSlots].sent -= ns
			c.mu.Unlock()
			c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: 64})
		}
	}
	if share := float64(bypassed) / float64(total); share > 0.03 {
		t.Errorf("%.1f%% of calls over the bypass, 1.6x slower; want the probe bursts' share, under 3%%", 100*share)
	}
}

// TestProbesOfANearlyFasterPathAreRare: a bypass cheaper than TCP, but not
// by the margin it needs to be taken, confirms TCP at each probe burst, so
// the bursts space out as for a slower one; probed as often as a bypass
// about to be taken, a fifth of the calls went over it for good.
func TestProbesOfANearlyFasterPathAreRare(t *testing.T) {
	c := newTestChooser(PathPolicy{})
	bypassed := 0
	for id := uint64(1); id <= 5000; id++ {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
		b := c.choose(m, true)
		ns := int64(40_000)
		if b {
			ns, bypassed = 30_000, bypassed+1
		}
		c.mu.Lock()
		c.slots[id%inflightSlots].sent -= ns
		c.mu.Unlock()
		c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: 64})
	}
	if c.bypass[0] {
		t.Fatal("the class took a bypass 0.75x of TCP's cost, short of the margin")
	}
	if share := float64(bypassed) / 5000; share > 0.02 {
		t.Errorf("%.1f%% of calls over the bypass as probes; want bursts spaced as for a confirmed choice, under 2%%", 100*share)
	}
}

// TestBurstOfMixedAnswersIsJudged: a method whose small requests are
// answered by tensors of two sizes in turn (as a ps pulls ids and then
// gradients from a worker) is chosen by the size its answers average,
// while each answer's sample goes to the class of its own size. The probe
// bursts are judged all the same, so they space out; counted by the
// classes their answers fell in, a burst was never judged, and a fourth
// of the calls went over the bypass for good.
func TestBurstOfMixedAnswersIsJudged(t *testing.T) {
	for _, bypassCost := range []int64{60_000, 30_000} { // 1.5x and 0.75x of TCP's
		c := newTestChooser(PathPolicy{})
		bypassed := 0
		const calls = 8000
		for id := uint64(1); id <= calls; id++ {
			ans := uint64(6 << 10) // the expected size settles at 16-20 KiB
			if id%2 == 0 {
				ans = 30 << 10
			}
			m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 100)}
			ns := int64(40_000)
			if c.choose(m, true) {
				ns, bypassed = bypassCost, bypassed+1
			}
			c.mu.Lock()
			c.slots[id%inflightSlots].sent -= ns
			c.mu.Unlock()
			c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: ans})
		}
		if share := float64(bypassed) / calls; share > 0.03 {
			t.Errorf("bypass at %v ns a call against TCP's 40000: %.1f%% of calls over it; want the probes' share, under 3%%", bypassCost, 100*share)
		}
	}
}

// newTestChooser is a chooser whose CPU clock stands still: no CPU is
// measured, so its margins are the prior ratio's, whatever else runs on
// the machine while the test does.
func newTestChooser(p PathPolicy) *chooser {
	c := newChooser(p)
	c.cpu, c.idle = func() time.Duration { return 0 }, busyMachine
	return c
}

// busyMachine is the idle clock of a machine with no CPU idle: the whole
// CPU ratio is charged.
func busyMachine() time.Duration { return 0 }

// wakeLink models depth callers keeping calls in flight, in fake time: a
// path serves its calls in turn, svc each, answers arriving lat later;
// the bypass, when it had nothing in flight, is asleep, and the first
// wakeCalls calls sent to it after are served 6x slower. Each answer costs the
// process 10 µs of CPU whatever its path, and wakeCPU more if it woke the
// bypass. With sleepAfter set, the bypass falls asleep only once it had
// nothing in flight for that long, and wakes in wakeN calls.
type wakeLink struct {
	svc        [2]time.Duration
	lat        time.Duration
	used       time.Duration
	busy       [2]time.Time
	waking     [2]int
	inflight   [2]int
	sleepAfter time.Duration
	wakeN      int
	wakeCPU    time.Duration
	last       time.Time
}

// asleep says whether a call sent now over path p meets it asleep.
func (l *wakeLink) asleep(p int) bool {
	if p != viaBypass || l.inflight[p] > 0 {
		return false
	}
	return l.sleepAfter == 0 || time.Since(l.last) > l.sleepAfter
}

const wakeCalls = 24

func (l *wakeLink) run(c *chooser, first uint64, n, depth int) float64 {
	type call struct {
		id   uint64
		path int
		at   time.Time
		woke bool
	}
	var flight []call
	id, bypassed := first, 0
	send := func() {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
		p := b2i(c.choose(m, true))
		bypassed += p
		if l.asleep(p) {
			l.waking[p] = wakeCalls
			if l.wakeN > 0 {
				l.waking[p] = l.wakeN
			}
		}
		l.inflight[p]++
		svc, woke := l.svc[p], l.waking[p] > 0
		if woke {
			l.waking[p]--
			svc *= 6
		}
		l.busy[p] = later(l.busy[p], time.Now()).Add(svc)
		flight = append(flight, call{id, p, l.busy[p].Add(l.lat), woke})
		id++
	}
	for range depth {
		send()
	}
	for sent := depth; len(flight) > 0; {
		var cl call
		cl, flight = earliest(flight, func(c call) time.Time { return c.at })
		time.Sleep(time.Until(cl.at))
		l.inflight[cl.path]--
		if l.used += 10 * time.Microsecond; cl.woke {
			l.used += l.wakeCPU
		}
		if cl.path == viaBypass {
			l.last = time.Now()
		}
		c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: cl.id, PayloadLen: 64})
		if sent < n {
			send()
			sent++
		}
	}
	return float64(bypassed) / float64(n)
}

// earliest removes from flight the call answered first, by at, and
// returns it and the calls left: the test links answer in that order.
func earliest[T any](flight []T, at func(T) time.Time) (T, []T) {
	next := 0
	for i := range flight {
		if at(flight[i]).Before(at(flight[next])) {
			next = i
		}
	}
	cl := flight[next]
	return cl, append(flight[:next], flight[next+1:]...)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestBurstAtDepthTimesAWarmPath: with 8 callers, a bypass 3x faster
// than TCP once awake is taken, though each burst meets it asleep and its
// first calls queue behind its wake-ups: the burst times only the calls
// sent once it is awake. Timing them all, the bypass looked slower than
// TCP and the class stayed there.
func TestBurstAtDepthTimesAWarmPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const us = time.Microsecond
		l := &wakeLink{svc: [2]time.Duration{30 * us, 10 * us}, lat: 50 * us}
		c := newChooser(PathPolicy{})
		c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
		l.run(c, 1, 4000, 8)
		if !c.bypass[0] {
			t.Fatal("the class stayed on TCP, 3x slower than the bypass awake")
		}
		if got := l.run(c, 10000, 4000, 8); got < 0.9 {
			t.Errorf("%.1f%% of calls over the bypass, want >= 90%%", 100*got)
		}
	})
}

// TestSoloBurstTimesAWarmPath: one caller, a bypass 3x faster than TCP
// awake that sleeps after 1 ms without calls and then takes 6 calls, at
// 6x its time and 100 µs of CPU each, to wake. A burst of four timed
// calls met it asleep every time, in time and in CPU, and the class
// stayed on TCP.
func TestSoloBurstTimesAWarmPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const us = time.Microsecond
		l := &wakeLink{svc: [2]time.Duration{30 * us, 10 * us}, lat: 10 * us,
			sleepAfter: time.Millisecond, wakeN: 6, wakeCPU: 100 * us}
		c := newChooser(PathPolicy{})
		c.cpu, c.idle = func() time.Duration { return l.used }, busyMachine
		l.run(c, 1, 20000, 1)
		if !c.bypass[0] {
			t.Fatal("the class stayed on TCP, 3x slower than the bypass awake")
		}
		if got := l.run(c, 30000, 4000, 1); got < 0.9 {
			t.Errorf("%.1f%% of calls over the bypass, want >= 90%%", 100*got)
		}
	})
}

// TestClassHoldsBetweenPathsAlike: where both paths cost the same, a
// burst that meets the other path at its best (0.7x) beats the margin,
// the next (1.3x) does not; the class holds its path. Moved by one burst,
// it switched at every lucky one.
func TestClassHoldsBetweenPathsAlike(t *testing.T) {
	c := newChooser(PathPolicy{})
	var used time.Duration
	c.cpu, c.idle = func() time.Duration { return used }, busyMachine
	bursts, inBurst, switches := 0, false, 0
	for id := uint64(1); id <= 20000; id++ {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, Method: 7, CallID: id}, Meta: make([]byte, 64)}
		was := c.bypass[0]
		probe := c.choose(m, true) != was
		if probe && !inBurst {
			bursts++
		}
		inBurst = probe
		ns := int64(40_000)
		if probe && bursts%2 == 1 {
			ns = 28_000
		} else if probe {
			ns = 52_000
		}
		c.mu.Lock()
		c.slots[id%inflightSlots].sent -= ns
		c.mu.Unlock()
		used += 10 * time.Microsecond
		c.answered(&wire.Header{Kind: wire.KindResponse, Method: 7, CallID: id, PayloadLen: 64})
		if c.bypass[0] != was {
			switches++
		}
	}
	if _, measured := c.cpuRatio(0); !measured {
		t.Fatal("CPU ratio not measured")
	}
	if switches > 0 || bursts < 10 {
		t.Fatalf("%d switches in %d bursts between paths alike, want none", switches, bursts)
	}
}
