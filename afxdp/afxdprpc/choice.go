package afxdprpc

import (
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/starwire/starwire/internal/units"
	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/wire"
)

func formatSize(n int64) string { return units.FormatSize(n) }

// Size classes: class 0 holds calls of at most 64 bytes, class c > 0 those
// of (2^(c+5), 2^(c+6)] bytes, and the last everything from 8 MiB on.
const (
	numClasses = 19
	minClass   = 6 // log2 of class 0's bound
)

func classOf(n int64) int {
	if n <= 1<<minClass {
		return 0
	}
	return min(bits.Len64(uint64(n-1))-minClass, numClasses-1)
}

// classBound is the smallest size of class c.
func classBound(c int) int64 {
	if c == 0 {
		return 0
	}
	return 1<<(c+minClass-1) + 1
}

// Paths, as indexes of the chooser's arrays.
const (
	viaTCP = iota
	viaBypass
)

// Auto mode's parameters. A class's estimate of a path is the minimum of
// its last calls' costs: round-trip time divided by the calls the path had
// in flight when it was sent (with itself), so that a path carrying many
// calls at once is judged by the rate it completes them and a lone call by
// its latency.
//
// Both paths are measured alike, in runs: a path the class does not use
// is idle (the bypass's reactors asleep in poll(), TCP's reader parked),
// and a lone call over it pays the wake-ups the chosen path, busy, never
// pays; judged by lone probes an idle bypass never looks better, and so
// stays idle, however much faster it is awake. So every probe is a
// burst: probeBurst calls in a row, more while the chosen path has more
// in flight, so that the probed path reaches the depth the chosen one
// has; the first of them wakes the path and the estimate, the minimum,
// is set by the ones that follow, as the chosen path's is. Classes from
// learnBelow up probe the bypass one call at a time (see startBurst).
//
// A class changes path only when a burst is judged, its fresh samples
// against the chosen path's: choosing again at every answer, a stall of
// the busy path (all its calls in flight delayed at once) made the other
// path's older estimate look cheaper, and with many callers sent a share
// of the calls over the slower path (docs/benchmarks-history.md, "Path
// choice measured alike").
//
// Every class starts on TCP, and one below learnBelow sends a burst over
// the bypass once TCP has minSamples. A class takes the bypass once it
// costs less than TCP by the margin the CPU it adds asks (choicecpu.go),
// and goes back once TCP costs less by the same measure. Every probeMin..probeMax
// calls it sends a burst over the other path to keep that estimate fresh,
// probing half as often each time a burst confirms the choice and twice
// as often when one beats it. A burst that confirms the choice also
// spaces the next so that probing costs the class at most probeBudget of
// its time: a burst of 4 over a path 4× slower costs twelve calls' time
// more, so the next waits 1200 calls (probeMax bounds it). In a job whose
// steps wait for each call in turn, a slow probe delays the whole step,
// which the doubling alone paid for dozens of times per class.
const (
	minSamples  = 3
	probeBurst  = 4
	maxBurst    = 64
	probeMin    = 16
	probeMax    = 1024
	probeBudget = 0.01
)

// confirmedGap is the probe gap after a probe burst of burst calls that
// cost ratio times the chosen path's cost confirmed the choice, from the
// previous gap. The gaps scale with the burst beyond probeBurst: a burst
// that warms the path first sends three times the calls, and spaced as
// four were it sent 2.2% of a class's calls over a path it did not take.
func confirmedGap(gap uint32, ratio float64, burst int) uint32 {
	scale := float64(max(burst, probeBurst)) / probeBurst
	budget := 2 * probeMin * scale
	if ratio > 1 { // and not NaN, from a zero estimate
		budget = max(budget, float64(burst)*(ratio-1)/probeBudget)
	}
	return uint32(min(max(float64(gap)*2, budget), probeMax*scale))
}

// learnBelow bounds the classes that measure both paths from their first
// calls; larger ones measure the bypass by probes only.
const learnBelow = 64 << 10

// estimate holds a path's last costs for one size class. Its cost is
// their minimum, what the path costs when nothing else delays a call: a
// call that waited for a CPU behind other work, or for its answer to be
// produced (a RecvTensor waits for its tensor), costs many times the
// usual through no fault of the path.
type estimate struct {
	last [estimateWindow]float64 // ns per call
	n    uint32
}

const estimateWindow = 8

func (e *estimate) add(ns float64) {
	e.last[e.n%estimateWindow] = ns
	e.n++
}

func (e *estimate) cost() float64 {
	m := int(min(e.n, estimateWindow))
	if m == 0 {
		return 0
	}
	return slices.Min(e.last[:m])
}

// inflightSlots bounds the calls the chooser times at once; a call whose
// slot a later call took is just not timed.
const inflightSlots = 1024

type slot struct {
	id     uint64
	sent   int64 // ns since the chooser's epoch
	path   uint8
	class  uint8  // the request's own size class
	chosen uint8  // the class its path was chosen by (its expected size's)
	depth  uint16 // calls in flight on the path when sent, itself included
	probe  bool   // a call of its class's probe burst
	warm   bool   // one of the burst's first, sent while its path wakes: not timed
	used   bool
}

// expectSlots direct-maps a method and its request's size class to the
// size of the answers seen: a method's answers often follow its requests
// (an echo, an update) or not at all (RecvTensor's small request fetches a
// tensor), and the request's class tells those apart.
const expectSlots = 256

type expected struct {
	method uint32
	class  uint8
	bytes  int64
}

func expectSlot(method uint32, class int) int {
	return int((method ^ uint32(class)*0x9e3779b1) % expectSlots)
}

// chooser picks the path of each call of one connection and keeps its
// statistics. Safe for concurrent use; it allocates nothing per call.
type chooser struct {
	policy PathPolicy
	epoch  time.Time

	mu       sync.Mutex
	est      [2][numClasses]estimate
	bypass   [numClasses]bool // auto: the class's choice
	sinceLog [numClasses]uint32
	probeGap [numClasses]uint32
	// burst is the calls of the class's probe burst still to send over
	// the other path; probed, the burst's samples yet to be judged (a
	// burst is judged once, by its last answer), and burstLen its length.
	burst    [numClasses]uint8
	probed   [numClasses]uint8
	burstLen [numClasses]uint8
	// warm is the calls of the burst still to send before its calls are
	// timed, and warmLen how many it had; settle is the calls still to
	// send over the class's own path, back from a burst or new to it,
	// before they are timed again; burstMin the least cost of its timed calls so far, 0 for
	// none; wins the bursts in a row that beat the class's path.
	warm     [numClasses]uint8
	warmLen  [numClasses]uint8
	settle   [numClasses]uint8
	burstMin [numClasses]float64
	wins     [numClasses]uint8
	slots    [inflightSlots]slot
	inflight [2]int
	expect   [expectSlots]expected
	// cpu reads the process's CPU time (processCPU); window is each
	// class's CPU window open, cpuUsed what each path's windows used, and
	// answers counts the connection's answers, which windows divide by.
	// idle reads the machine's idle CPU time (machineIdle), and idleFrom
	// is when the connection last had no call in flight.
	cpu      func() time.Duration
	idle     func() time.Duration
	idleFrom int64
	window   [numClasses]cpuWindow
	cpuUsed  [2][numClasses]cpuRecord
	answers  uint64
	calls    [2]uint64
	bytes    [2]uint64
	// classCalls counts the calls each class chose a path for.
	classCalls [numClasses]uint64
	// trace, nil unless STARWIRE_CHOOSER_TRACE=1, writes the chooser's
	// probes, judgements, switches and CPU windows (choicetrace.go).
	trace *chooserTrace
}

func newChooser(p PathPolicy) *chooser {
	c := &chooser{policy: p, epoch: time.Now(), cpu: processCPU, idle: machineIdle, trace: newChooserTrace()}
	for i := range c.bypass {
		c.probeGap[i] = probeMin
	}
	return c
}

// requestBytes is what m puts on the wire beyond its header.
func requestBytes(m *wire.Message) int64 {
	n := int64(len(m.Meta))
	for i := range m.Tensors {
		n += int64(len(m.Tensors[i].Data))
	}
	return n
}

// choose returns whether request m goes over the bypass, open telling
// whether there is one, and records the call for timing.
func (c *chooser) choose(m *wire.Message, open bool) bool {
	req := requestBytes(m)
	size := req
	now := int64(time.Since(c.epoch))
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := &c.expect[expectSlot(m.Header.Method, classOf(req))]; e.method == m.Header.Method && int(e.class) == classOf(req) {
		size = max(size, e.bytes)
	}
	k := classOf(size)
	c.sent(now)
	bypass, warm := false, false
	if open {
		bypass, warm = c.pick(k, size)
	}
	path := viaTCP
	if bypass {
		path = viaBypass
	}
	probe := c.policy.Mode == PathAuto && bypass != c.bypass[k]
	s := &c.slots[m.Header.CallID%inflightSlots]
	if s.used {
		c.inflight[s.path]--
	}
	c.inflight[path]++
	*s = slot{id: m.Header.CallID, sent: now, path: uint8(path), class: uint8(classOf(req)), chosen: uint8(k),
		depth: uint16(min(c.inflight[path], 1<<16-1)), probe: probe, warm: warm, used: true}
	c.calls[path]++
	c.bytes[path] += uint64(req)
	c.classCalls[k]++
	return bypass
}

// pick applies the policy to a call of size bytes in class k, and says
// whether the call is one of a probe burst's first, not timed.
func (c *chooser) pick(k int, size int64) (bypass, warm bool) {
	switch c.policy.Mode {
	case PathAFXDP:
		return true, false
	case PathTCPOnly:
		return false, false
	case PathThreshold:
		return size < c.policy.Threshold, false
	}
	cur := c.bypass[k]
	if c.burst[k] > 0 {
		if c.burst[k]--; c.burst[k] == 0 {
			c.settle[k] = c.warmLen[k] // its own path drained meanwhile
		}
		if c.warm[k] > 0 {
			if c.warm[k]--; c.warm[k] == 0 {
				// The warm-up's CPU is the wake-ups', not what the
				// path costs awake: its window is not counted.
				c.switchCPUWindow(k, b2i(!cur))
			}
			return !cur, true
		}
		return !cur, false
	}
	if c.settle[k] > 0 {
		c.settle[k]--
		return cur, true
	}
	if !c.window[k].open && c.classCalls[k] == 0 {
		c.openCPUWindow(k, b2i(cur)) // the class's first call
	}
	if c.est[b2i(cur)][k].n < minSamples {
		return cur, false
	}
	// A small class learns the other path at once: a call costs little
	// either way. A large one waits for its first probe, since a few of
	// its calls over the slower path cost more than a job with few of
	// them can win back.
	learn := c.est[b2i(!cur)][k].n == 0 && classBound(k) < learnBelow
	if c.sinceLog[k]++; !learn && c.sinceLog[k] < c.probeGap[k] {
		return cur, false
	}
	c.startBurst(k)
	return c.pick(k, size) // the burst's first call
}

// startBurst starts a probe burst of class k, this call its first. A
// class from learnBelow up on TCP probes the bypass with one call: a
// wake-up is little of such a call's time, and each call over the slower
// path costs much. On the bypass it probes TCP with as many calls as the
// bypass has in flight: one TCP call, judged by its latency against the
// bypass's cost at depth (its round trip over the calls in flight), looks
// slower than TCP is, and with 8 callers a class of 64 KiB calls that had
// gone over an AF_XDP 4x slower stayed there (BENCHMARKS.md).
func (c *chooser) startBurst(k int) {
	if c.probed[k] > 0 {
		c.judge(k) // the last burst lost an answer: judged as it stands
	}
	depth := c.inflight[b2i(c.bypass[k])]
	n, warm := 1, 0
	switch {
	case classBound(k) < learnBelow:
		n, warm = burstLen(depth)
	case c.bypass[k]:
		n = min(depth+1, maxBurst)
	}
	c.sinceLog[k], c.burstMin[k] = 0, 0
	c.burst[k], c.probed[k], c.burstLen[k] = uint8(n), uint8(n), uint8(n)
	c.warm[k], c.warmLen[k] = uint8(warm), uint8(warm)
	c.switchCPUWindow(k, b2i(!c.bypass[k]))
	c.window[k].spoiled = warm > 0 // until the warm calls are sent
	c.traceBurst(k, n, warm, depth)
}

// warmRounds is the rounds of the chosen path's depth a small class's
// burst sends untimed before it times any. With many callers a burst's
// first calls meet a path asleep, and queue behind its wake-ups at
// every depth: timed, they made a path 4x faster when awake look 2-10x
// slower than it is, and the class stayed on TCP.
const warmRounds = 4

// burstLen returns the length of a small class's probe burst, the
// chosen path having depth calls in flight, and how many of its first
// are not timed: probeBurst+depth timed, so that the probed path reaches
// the chosen one's depth, after warmRounds×depth untimed, all within
// maxBurst. A lone caller (depth 0 or 1) warms it as two would: its
// reactors, asleep since the last burst, took 50-110 µs a call for the
// burst's first calls where awake they take 6-9 µs, so a burst of four
// timed calls found it slower than TCP nine times in ten.
func burstLen(depth int) (n, warm int) {
	n = min(probeBurst+depth, maxBurst)
	warm = min(warmRounds*max(depth, 2), maxBurst-n)
	return n + warm, warm
}

func b2i(b bool) int {
	if b {
		return viaBypass
	}
	return viaTCP
}

// pathOf returns the path call id took, if the chooser still knows it.
func (c *chooser) pathOf(id uint64) (bypass, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.slots[id%inflightSlots]
	if !s.used || s.id != id {
		return false, false
	}
	return s.path == viaBypass, true
}

// answered records the answer to a call: its size for the method, and in
// auto mode its round trip for the path it took.
func (c *chooser) answered(h *wire.Header) {
	if h.Kind != wire.KindResponse && h.Kind != wire.KindError {
		return
	}
	now := int64(time.Since(c.epoch))
	n := int64(h.BodyLen())
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.slots[h.CallID%inflightSlots]
	if !s.used || s.id != h.CallID {
		return
	}
	s.used = false
	c.answers++
	if c.inflight[s.path]--; c.inflight[viaTCP]+c.inflight[viaBypass] == 0 {
		c.idleFrom = now
	}
	c.bytes[s.path] += uint64(n)
	if s.probe {
		// Counted by the class that chose the call, whatever the class
		// of its answer's size, which its sample goes to: a burst whose
		// answers fell in other classes is judged all the same.
		defer c.probeAnswered(int(s.chosen))
	}
	if h.Kind != wire.KindResponse {
		return
	}
	if e := &c.expect[expectSlot(h.Method, int(s.class))]; e.method == h.Method && e.class == s.class {
		e.bytes += (n - e.bytes) / 4
	} else {
		*e = expected{method: h.Method, class: s.class, bytes: n}
	}
	if c.policy.Mode == PathAuto && !s.warm {
		k := max(int(s.class), classOf(n))
		ns := float64(now-s.sent) / float64(max(s.depth, 1))
		c.sample(s.path == viaBypass, k, ns)
		if s.probe && k == int(s.chosen) && (c.burstMin[k] == 0 || ns < c.burstMin[k]) {
			c.burstMin[k] = ns
		}
	}
}

// sample adds a cost of ns for a call of class k over the bypass or not.
// The class's choice is made again when a burst is judged, not here: a
// stall that delays all of the chosen path's calls in flight at once (a
// CPU taken for a millisecond) would make the other path's older estimate
// look better for a moment.
func (c *chooser) sample(bypass bool, k int, ns float64) {
	c.est[b2i(bypass)][k].add(ns)
}

// probeAnswered counts an answer to a call of class k's probe burst, and
// judges the burst once its last is in.
func (c *chooser) probeAnswered(k int) {
	if c.probed[k] == 0 {
		return // a burst already judged, when the next started
	}
	if c.probed[k]--; c.probed[k] == 0 {
		c.judge(k)
	}
}

// judge spaces class k's next probe burst by what the last one found, and
// chooses the class's path again. The burst is judged by its own timed
// calls (burstMin), not by the estimate, which still holds the bursts
// before it: one burst that met the probed path at its best would
// otherwise count for the next too.
func (c *chooser) judge(k int) {
	c.probed[k] = 0
	defer c.burstEnded(k)
	mine := &c.est[b2i(c.bypass[k])][k]
	if mine.n < minSamples {
		return
	}
	mc, oc, margin := mine.cost(), c.burstMin[k], c.margin(k)
	switch {
	case oc == 0:
		// The burst's answers fell in other classes: this class learned
		// nothing of the other path, and probing it as often again would
		// learn nothing more.
		c.probeGap[k] = confirmedGap(c.probeGap[k], 1, int(c.burstLen[k]))
		c.traceJudge(k, mc, oc, margin, "nothing learned")
		return
	case oc < mc*margin:
		// A burst that beat the choice by the margin to switch: the next
		// comes sooner. One that beat it by less confirms it: a bypass a
		// little cheaper than TCP is not taken, and probing it as often as
		// one that will be would send a fifth of the class's calls over it
		// for good.
		c.probeGap[k] = max(c.probeGap[k]/2, probeMin)
		c.wins[k] = min(c.wins[k]+1, switchWins)
	default:
		c.probeGap[k] = confirmedGap(c.probeGap[k], oc/mc, int(c.burstLen[k]))
		c.wins[k] = 0
	}
	c.decide(k, mc, oc, margin)
}

// switchWins is the bursts in a row that must beat a class's path for it
// to change path. Where both paths cost about the same, one burst that
// met the other path at its best, or the chosen one at its worst, moved
// the class, and the next moved it back: 35 switches in 2 s, each paying
// the wake-ups of a path gone idle.
const switchWins = 2

// decide changes class k's path once switchWins bursts in a row beat it;
// mc, oc and margin are what the last burst was judged by.
func (c *chooser) decide(k int, mc, oc, margin float64) {
	cur := c.bypass[k]
	if c.wins[k] < switchWins || c.est[b2i(!cur)][k].n < minSamples || c.probed[k] > 0 {
		verdict := "hold"
		if c.wins[k] > 0 {
			verdict = "beat"
		}
		c.traceJudge(k, mc, oc, margin, verdict)
		return
	}
	c.traceJudge(k, mc, oc, margin, "switch")
	c.bypass[k], c.wins[k], c.settle[k] = !cur, 0, c.warmLen[k]
	c.probeGap[k], c.sinceLog[k] = probeMin, 0
}

// crossover is the smallest call size that goes over TCP now: 0 when every
// call does, -1 when none does.
func (c *chooser) crossover() int64 {
	switch c.policy.Mode {
	case PathAFXDP:
		return -1
	case PathTCPOnly:
		return 0
	case PathThreshold:
		return c.policy.Threshold
	}
	for k := range numClasses {
		if !c.bypass[k] {
			return classBound(k)
		}
	}
	return -1
}

// PathStats describe the calls of one dual connection.
type PathStats struct {
	Peer   string
	Policy string
	// Packet says what the connection's packet session runs over
	// (netpath.AFXDP, netpath.UDP), empty while it has none.
	Packet netpath.Path
	// Calls and Bytes count the calls each path carried and the bytes of
	// their requests and answers (beyond frame headers); AFXDP counts
	// those of the packet session, as the policy's "afxdp" names it.
	TCPCalls, AFXDPCalls uint64
	TCPBytes, AFXDPBytes uint64
	// Crossover is the smallest call size sent over TCP now: 0 when every
	// call is, -1 when none is. Under PathAuto it is the first size class
	// measured faster over TCP; classes above it may still take AF_XDP
	// where that measured faster.
	Crossover int64
	// TCPClasses lists, under PathAuto, the lower bounds of the size
	// classes that go over TCP.
	TCPClasses []int64
	// AFXDPSizes describes the call sizes that go over AF_XDP now:
	// "none", "all", or ranges such as "size≤4KiB, 16KiB<size≤32KiB".
	AFXDPSizes string
	// Classes are, under PathAuto, the size classes that carried calls,
	// smallest first: why each takes the path it does.
	Classes []ClassChoice
}

// A ClassChoice is one size class's choice of path under PathAuto, and
// the measurements that made it.
type ClassChoice struct {
	// Sizes of the class's calls are in (Above, AtMost]; AtMost is 0 for
	// the last class, which has no bound.
	Above, AtMost int64
	// Calls counts the calls the class chose a path for.
	Calls uint64
	// AFXDP says whether the class's calls take AF_XDP now.
	AFXDP bool
	// TCPCost and AFXDPCost are each path's measured time per call (its
	// estimate), 0 while unmeasured.
	TCPCost, AFXDPCost time.Duration
	// Margin is the share of the chosen path's cost the other must cost
	// less than to be taken.
	Margin float64
	// CPURatio is the process's CPU per call over AF_XDP over that
	// over TCP, measured for the class and bounded as the margin uses
	// it; 0 while unmeasured (the margin then assumes priorCPURatio).
	CPURatio float64
}

func (c *chooser) stats() PathStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := PathStats{Policy: c.policy.String(), TCPCalls: c.calls[viaTCP], AFXDPCalls: c.calls[viaBypass],
		TCPBytes: c.bytes[viaTCP], AFXDPBytes: c.bytes[viaBypass], Crossover: c.crossover()}
	var on [numClasses]bool
	for k := range numClasses {
		switch c.policy.Mode {
		case PathAuto:
			on[k] = c.bypass[k]
			if !on[k] {
				st.TCPClasses = append(st.TCPClasses, classBound(k))
			}
		case PathAFXDP:
			on[k] = true
		case PathThreshold:
			on[k] = classBound(k) < c.policy.Threshold
		}
	}
	st.AFXDPSizes = describeClasses(on)
	if c.policy.Mode == PathAuto {
		st.Classes = c.classChoices()
	}
	return st
}

// classChoices reports the classes that carried calls.
func (c *chooser) classChoices() []ClassChoice {
	var out []ClassChoice
	for k := range numClasses {
		if c.classCalls[k] == 0 {
			continue
		}
		cc := ClassChoice{Above: max(classBound(k)-1, 0), Calls: c.classCalls[k], AFXDP: c.bypass[k],
			TCPCost:   time.Duration(c.est[viaTCP][k].cost()),
			AFXDPCost: time.Duration(c.est[viaBypass][k].cost()), Margin: c.margin(k)}
		if r, ok := c.cpuRatio(k); ok {
			cc.CPURatio = r
		}
		if k < numClasses-1 {
			cc.AtMost = classBound(k+1) - 1
		}
		out = append(out, cc)
	}
	return out
}

// describeClasses writes the sizes of the classes set in on as ranges.
func describeClasses(on [numClasses]bool) string {
	var parts []string
	for k := 0; k < numClasses; k++ {
		if !on[k] {
			continue
		}
		j := k
		for j+1 < numClasses && on[j+1] {
			j++
		}
		lo, hi := formatSize(max(classBound(k)-1, 0))+"<", "≤"+formatSize(classBound(j+1)-1)
		if k == 0 {
			lo = ""
		}
		if j == numClasses-1 {
			if k == 0 {
				return "all"
			}
			hi = ""
		}
		parts = append(parts, lo+"size"+hi)
		k = j
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
