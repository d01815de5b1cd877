package afxdp

import (
	"runtime/metrics"
	"strings"
	"testing"
	"time"
)

func TestPlanPolling(t *testing.T) {
	tests := []struct {
		name string
		s    cpuState
		r    pollRequest
		want pollPlan
		why  string // a part of Why; empty: Why must be empty
	}{
		{"adaptive untouched", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2}, pollRequest{}, pollPlan{CPU: -1}, ""},
		{"first spinner of two CPUs", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2}, pollRequest{Busy: true},
			pollPlan{Busy: true, CPU: 0}, ""},
		{"second spinner of two CPUs", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2, Spinning: 1, Taken: []int{0}}, pollRequest{Busy: true},
			pollPlan{CPU: -1}, "1 spinning reactor(s) already"},
		{"one CPU: never spin", cpuState{Allowed: []int{3}, GOMAXPROCS: 8}, pollRequest{Busy: true},
			pollPlan{CPU: -1}, "may run on 1 CPU(s)"},
		{"GOMAXPROCS below the mask", cpuState{Allowed: []int{0, 1, 2, 3}, GOMAXPROCS: 2, Spinning: 1, Taken: []int{0}}, pollRequest{Busy: true},
			pollPlan{CPU: -1}, "GOMAXPROCS 2"},
		{"affinity below NumCPU", cpuState{Allowed: []int{4, 5, 6}, GOMAXPROCS: 8, Spinning: 1, Taken: []int{4}}, pollRequest{Busy: true},
			pollPlan{Busy: true, CPU: 5}, ""},
		{"co-located tasks hold CPUs", cpuState{Allowed: []int{0, 1, 2, 3}, GOMAXPROCS: 4, Taken: []int{0, 1, 2}}, pollRequest{Busy: true},
			pollPlan{CPU: -1}, "leaving 1 for work"},
		{"pinned spinner on the CPU asked", cpuState{Allowed: []int{0, 1, 2, 3}, GOMAXPROCS: 4, Spinning: 1, Taken: []int{0}}, pollRequest{Busy: true, Pin: true, CPU: 2},
			pollPlan{Busy: true, Pin: true, CPU: 2}, ""},
		{"pinned spinner's CPU index wraps over the mask", cpuState{Allowed: []int{8, 9, 10}, GOMAXPROCS: 3}, pollRequest{Busy: true, Pin: true, CPU: 4},
			pollPlan{Busy: true, Pin: true, CPU: 9}, ""},
		{"two pinned spinners never share a CPU", cpuState{Allowed: []int{0, 1, 2, 3}, GOMAXPROCS: 4, Spinning: 1, Taken: []int{1}}, pollRequest{Busy: true, Pin: true, CPU: 1},
			pollPlan{Busy: true, Pin: true, CPU: 0}, "instead of 1"},
		{"refused spinner still pinned, off the spinner's CPU", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2, Spinning: 1, Taken: []int{1}}, pollRequest{Busy: true, Pin: true, CPU: 1},
			pollPlan{Pin: true, CPU: 0}, "pinned to CPU 0 instead of 1"},
		{"adaptive pinned reactor", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2}, pollRequest{Pin: true, CPU: 3},
			pollPlan{Pin: true, CPU: 1}, ""},
		{"nothing to pin to", cpuState{GOMAXPROCS: 2}, pollRequest{Pin: true}, pollPlan{CPU: -1}, "no CPU"},
		{"every CPU spun", cpuState{Allowed: []int{0, 1}, GOMAXPROCS: 2, Taken: []int{0, 1}}, pollRequest{Pin: true},
			pollPlan{CPU: -1}, "spinning reactors hold every CPU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planPolling(tt.s, tt.r)
			why := got.Why
			got.Why = ""
			if got != tt.want {
				t.Errorf("plan %+v, want %+v (why %q)", got, tt.want, why)
			}
			if tt.why == "" && why != "" || !strings.Contains(why, tt.why) {
				t.Errorf("why %q, want it to say %q", why, tt.why)
			}
		})
	}
}

// TestClaimPollingCapsSpinners: of the reactors of one process asking to
// spin, only as many as leave a CPU for work do; each holds a CPU of its
// own, which a co-located process sees as taken through the lock files;
// the CPUs come back when the reactors stop.
func TestClaimPollingCapsSpinners(t *testing.T) {
	spinners.mu.Lock()
	already := len(spinners.held) // reactors of tests before this one
	spinners.dir = t.TempDir()
	spinners.mu.Unlock()
	t.Cleanup(func() { spinners.mu.Lock(); spinners.dir = ""; spinners.mu.Unlock() })

	allowed := allowedCPUs()
	var claims []*pollClaim
	spun := map[int]bool{}
	for range len(allowed) + 2 {
		o, c := claimPolling(Options{Busy: true, Pin: true})
		claims = append(claims, c)
		if o.Busy {
			if spun[o.CPU] {
				t.Fatalf("two spinning reactors on CPU %d", o.CPU)
			}
			spun[o.CPU] = true
		}
	}
	if want := max(min(len(allowed), runtimeProcs())-1-already, 0); len(spun) != want {
		t.Fatalf("%d spinning reactors on %d CPUs, want %d", len(spun), len(allowed), want)
	}
	spinners.mu.Lock()
	taken := takenCPUs(allowed)
	spinners.mu.Unlock()
	for cpu := range spun {
		f, ok := lockCPU(cpu) // another process's view: its own open file
		if ok {
			f.Close()
			t.Fatalf("CPU %d free to another process while a reactor spins on it (taken %v)", cpu, taken)
		}
	}
	for _, c := range claims {
		c.release()
	}
	for cpu := range spun {
		f, ok := lockCPU(cpu)
		if !ok {
			t.Fatalf("CPU %d still held after the reactors stopped", cpu)
		}
		f.Close()
	}
}

// TestPollBackOff: an idle spinning reactor whose polls come further apart
// than pollGap (another thread had its CPU) sleeps for pollBackOff, then
// spins again; the first poll of an idle spell measures no gap.
func TestPollBackOff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := &pollClaim{cpu: -1, sample: []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}}
	c.nextCheck = t0.Add(time.Hour) // the runnable count is the scheduler's: not read here
	steps := []struct {
		now, idleAt time.Duration
		want        bool
	}{
		{0, 0, false},
		{time.Microsecond, 0, false},
		{2 * time.Microsecond, 0, false},
		{2*time.Microsecond + pollGap + 1, 0, true}, // descheduled
		{3*time.Microsecond + pollGap, 0, true},     // still backing off
		{pollBackOff + pollGap + 3*time.Microsecond, pollBackOff + pollGap + 3*time.Microsecond, false}, // a new spell after it
		{pollBackOff + pollGap + 4*time.Microsecond, pollBackOff + pollGap + 3*time.Microsecond, false},
		{time.Hour - time.Second, time.Hour - time.Second, false}, // first poll of a spell: no gap
	}
	for i, s := range steps {
		if got := c.backOff(t0.Add(s.now), t0.Add(s.idleAt)); got != s.want {
			t.Fatalf("step %d (%v): backOff %v, want %v", i, s.now, got, s.want)
		}
	}
	var none pollClaim // a reactor that was not granted spinning never backs off
	if none.backOff(t0, t0) || none.backOff(t0.Add(time.Second), t0) {
		t.Fatal("backOff without a claim")
	}
}
