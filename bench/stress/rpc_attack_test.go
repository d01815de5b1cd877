package stress_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
)

const (
	// maxGrowth is how far a hostile peer may raise the server's RSS.
	maxGrowth = 256 << 20
	// memoryGuard is where the server is killed rather than let it take
	// the machine's memory.
	memoryGuard = 6 << 30
	// attackWindow is how long each attack and its probe run.
	attackWindow = 2500 * time.Millisecond
	// probeP99 is the p99 a well-behaved client must keep beside an attacker.
	probeP99 = 100 * time.Millisecond
	// probeWakeups is how many wake-ups a probe call crosses in each
	// process: the server's reader and handler, the client's reader and
	// caller.
	probeWakeups = 2
)

// probeWorkload is the well-behaved client beside an attacker: small calls,
// one after another, on two callers.
func probeWorkload() stress.Workload {
	return stress.Workload{Callers: 2, MinSize: 64, MaxSize: 4 << 10,
		Ops: []stress.Op{stress.OpEchoInline, stress.OpEcho}, Deadline: time.Second, Seed: 1}
}

// TestStressAttacks runs each of issue 9's hostile peers against a fresh
// server process, all at once (parallel subtests, beside this package's
// other parallel tests): its RSS and its heap must grow by less than
// maxGrowth, and a well-behaved client beside the attacker must keep
// every call correct and its p99 under probeP99, plus what the machine
// (the other attacks among it) added by running either process late. A
// call that passes its deadline counts as a slow one, not a wrong one: on
// a loaded machine the handlers of the peer that never reads, making
// their 128 MiB of answers, can hold the server's processors for longer
// than a probe call's deadline.
//
// The server runs with its defaults. Each call of the peer that never
// reads asks for a 16 MiB answer; its handler makes it in
// Response.NewBuffer, which the connection's SendBudget bounds (see
// TestStressNoReadHoldsSendBudget for the bound itself).
func TestStressAttacks(t *testing.T) {
	t.Parallel() // beside the other attacks: a server process of its own
	seed := uint64(time.Now().UnixNano())
	attacks := []struct {
		stress.Attack
		maxCalls int // the server's MaxConcurrentCalls; 0 for the default
	}{
		{Attack: stress.Claim("4 GiB payload claimed", stress.ClaimPayload(stress.MethodEcho.ID, 4<<30), 1<<20)},
		{Attack: stress.Claim("1 GiB payload claimed", stress.ClaimPayload(stress.MethodEcho.ID, 1<<30), 1<<20)},
		{Attack: stress.Claim("64 MiB metadata claimed", stress.ClaimMeta(stress.MethodEcho.ID, 64<<20), 1<<20)},
		{Attack: stress.NoRead(24, 16<<20)},
		{Attack: stress.HalfFrames(seed)},
		{Attack: stress.Random(seed)},
	}
	var mu sync.Mutex
	var results []stress.AttackResult
	// After the subtests, which run in parallel once this function returns.
	t.Cleanup(func() { stress.FormatAttacks(os.Stderr, results...) })
	for _, a := range attacks {
		t.Run(a.Name, func(t *testing.T) {
			// Each attack has a server process of its own, whose memory is
			// what it measures; the probes' p99 bound grows with the
			// lateness the other attacks add to either process.
			t.Parallel()
			var env []string
			if a.maxCalls > 0 {
				env = append(env, fmt.Sprintf("%s=%d", maxCallsEnv, a.maxCalls))
			}
			p := startStressServer(t, env...)
			c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
			defer c.Close()
			warm := probeWorkload()
			warm.Duration = 200 * time.Millisecond
			if r := warm.Run(context.Background(), c); r.OK == 0 || r.OK != r.Calls {
				t.Fatalf("warm-up calls failed: %s", r)
			}
			r := stress.RunAttack(p, a.Attack, attackWindow, c, probeWorkload(), memoryGuard)
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
			checkAttack(t, &r)
		})
	}
}

// TestStressNoReadHoldsSendBudget: a peer starts 100 calls for 16 MiB
// answers at once, before any answer exists, and reads none of them. The
// server, a process of its own with its defaults, grows by at most
// SendBudget plus one answer, and 32 MiB for the rest of what it does
// meanwhile (the handlers waiting for budget, the probe's calls, the
// runtime's slack); a well-behaved client beside the peer keeps its p99
// under probeP99 plus what the machine added by running either process
// late.
func TestStressNoReadHoldsSendBudget(t *testing.T) {
	t.Parallel() // beside the other attacks: a server process of its own
	const calls, answer = 100, 16 << 20
	limit := int64(rpc.DefaultSendBudget + answer + 32<<20)
	p := startStressServer(t)
	c := rpc.NewClient(p.Addr, rpc.ClientOptions{Transport: &tcp.Transport{}})
	defer c.Close()
	warm := probeWorkload()
	warm.Duration = 200 * time.Millisecond
	if r := warm.Run(context.Background(), c); r.OK == 0 || r.OK != r.Calls {
		t.Fatalf("warm-up calls failed: %s", r)
	}
	r := stress.RunAttack(p, stress.NoRead(calls, answer), attackWindow, c, probeWorkload(), memoryGuard)
	stress.FormatAttacks(os.Stderr, r)
	if !r.Aborted && r.Err == nil && r.Growth() > limit {
		t.Errorf("server RSS grew by %s (from %s to a peak of %s), over SendBudget + one answer + 32 MiB = %s",
			stress.MiB(r.Growth()), stress.MiB(r.Before.RSS), stress.MiB(r.Peak), stress.MiB(limit))
	}
	if !r.Aborted && r.Err == nil && r.HeapGrowth() > limit {
		t.Errorf("server heap grew by %s (from %s to a peak of %s), over %s",
			stress.MiB(r.HeapGrowth()), stress.MiB(r.HeapBefore), stress.MiB(r.HeapPeak), stress.MiB(limit))
	}
	checkAttack(t, &r)
}

func checkAttack(t *testing.T, r *stress.AttackResult) {
	t.Helper()
	switch {
	case r.Aborted:
		t.Errorf("server RSS passed %s above its %s before the attack: killed", stress.MiB(memoryGuard), stress.MiB(r.Before.RSS))
	case r.Err != nil:
		t.Errorf("attack: %v", r.Err)
	case r.Growth() >= maxGrowth:
		t.Errorf("server RSS grew by %s (from %s to a peak of %s), over %s", stress.MiB(r.Growth()),
			stress.MiB(r.Before.RSS), stress.MiB(r.Peak), stress.MiB(maxGrowth))
	case r.HeapGrowth() >= maxGrowth:
		// Memory taken on a claim and not yet touched is not resident;
		// it is still taken.
		t.Errorf("server heap grew by %s (from %s to a peak of %s), over %s", stress.MiB(r.HeapGrowth()),
			stress.MiB(r.HeapBefore), stress.MiB(r.HeapPeak), stress.MiB(maxGrowth))
	}
	p := r.Probe
	switch {
	case p == nil:
		t.Error("no probe report")
	case p.Hung > 0:
		t.Errorf("%d of the well-behaved client's calls hung, the oldest for %v", p.Hung, p.OldestHung)
	case p.Corrupted > 0 || p.Failed(wire.DeadlineExceeded) > 0:
		t.Errorf("the well-behaved client's calls failed: %d corrupted, %s %v", p.Corrupted, p.CodeSummary(), p.Errors)
	case p.OK == 0:
		t.Error("the well-behaved client made no call")
	case p.Codes[wire.DeadlineExceeded]*100 > p.Calls:
		// A call past its deadline is a slow call, which the p99 is
		// about; more than one in a hundred puts the p99 past the deadline.
		t.Errorf("%d of the well-behaved client's %d calls passed their deadline of %v: its p99 is over that",
			p.Codes[wire.DeadlineExceeded], p.Calls, probeWorkload().Deadline)
	case p.P99 > probeP99+probeWakeups*(p.SchedLate+r.ServerLate):
		// What the machine adds by waking either process late is not the
		// server's doing; the lateness of each is measured in the same
		// window, as the longest a goroutine of it woke past its time.
		// A server stalled by the attacker is not late in that sense:
		// its timers still fire.
		t.Errorf("the well-behaved client's p99 was %v (max %v), over %v plus %d× the %v and %v the machine woke the client and the server late",
			p.P99, p.Max, probeP99, probeWakeups, p.SchedLate, r.ServerLate)
	}
	if t.Failed() && p != nil {
		t.Logf("probe: %s", p)
	}
}
