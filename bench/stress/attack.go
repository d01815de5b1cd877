package stress

import (
	"context"
	"fmt"
	"io"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/starwire/starwire/rpc"
)

// An AttackResult is what an attack did to the server and to a
// well-behaved client beside it.
type AttackResult struct {
	Name   string
	Conns  int   // hostile connections opened
	Err    error // why the attack could not go on, if it stopped early
	Before Mem   // the server's memory before the attack
	Peak   int64 // the server's VmHWM during the attack
	After  Mem   // the server's memory once the attack ended
	// HeapBefore and HeapPeak are the server's Go heap before and at its
	// most during the attack (see MethodHeap); 0 when not known.
	HeapBefore, HeapPeak int64
	// Aborted says the server was killed because its memory grew past
	// the guard; Peak is then at least the guard.
	Aborted bool
	Probe   *Report // the well-behaved client's calls during the attack
	// ServerLate is the longest a goroutine of the server woke late
	// during the attack (see MethodLate), as Probe.SchedLate is the
	// client's: what the machine, not the code, added to a probe call on
	// each side.
	ServerLate time.Duration
}

// Growth is how far the server's resident memory rose above where it was
// before the attack.
func (r *AttackResult) Growth() int64 { return r.Peak - r.Before.RSS }

// HeapGrowth is how far the server's Go heap rose above where it was
// before the attack: memory taken, touched or not.
func (r *AttackResult) HeapGrowth() int64 { return r.HeapPeak - r.HeapBefore }

// heapTimeout bounds a MethodHeap call.
const heapTimeout = 2 * time.Second

// guardEvery is how often RunAttack samples the server's memory.
const guardEvery = 10 * time.Millisecond

// RunAttack runs a against the server p for window while probe runs on c,
// and measures the server's memory. If the server's RSS grows by more than
// guard, it is killed at once, so that an unbounded allocation cannot take
// the machine's memory.
func RunAttack(p *Proc, a Attack, window time.Duration, c *rpc.Client, probe Workload, guard int64) AttackResult {
	r := AttackResult{Name: a.Name}
	var err error
	if r.Before, err = p.Mem(); err != nil {
		r.Err = err
		return r
	}
	if err := ResetHWM(p.Pid()); err != nil {
		r.Err = err
		return r
	}
	hctx, hcancel := context.WithTimeout(context.Background(), heapTimeout)
	r.HeapBefore, _, err = Heap(hctx, c)
	if err == nil {
		_, err = Late(hctx, c)
	}
	hcancel()
	if err != nil {
		r.Err = err
		return r
	}
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.Conns, r.Err = a.Run(ctx, p.Addr)
	}()
	probe.Duration = window
	if probe.Name == "" {
		probe.Name = "beside " + a.Name
	}
	go func() {
		defer wg.Done()
		// A probe that outlives its window by its deadline and more is hung.
		pctx, pcancel := context.WithTimeout(context.Background(), window+probe.Deadline+5*time.Second)
		defer pcancel()
		r.Probe = probe.Run(pctx, c)
	}()
	stopGuard := make(chan struct{})
	guarded := make(chan int64, 1)
	go func() { guarded <- watch(p, r.Before.RSS+guard, stopGuard) }()
	wg.Wait()
	close(stopGuard)
	peak := <-guarded
	if peak > 0 {
		r.Aborted, r.Peak = true, peak
		return r
	}
	if m, err := p.Mem(); err == nil {
		r.Peak = m.HWM
	}
	hctx, hcancel = context.WithTimeout(context.Background(), heapTimeout)
	_, r.HeapPeak, err = Heap(hctx, c)
	if err == nil {
		r.ServerLate, err = Late(hctx, c)
	}
	hcancel()
	if err != nil && r.Err == nil {
		r.Err = err
	}
	// The attack's connections are closed; what the server still holds
	// a moment later is what it kept.
	hold(context.Background(), 200*time.Millisecond)
	r.After, _ = p.Mem()
	return r
}

// watch samples p's memory until stop closes, and kills p, returning the
// RSS it saw, when it goes over limit. It returns 0 otherwise.
func watch(p *Proc, limit int64, stop <-chan struct{}) int64 {
	t := time.NewTicker(guardEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return 0
		case <-t.C:
		}
		m, err := p.Mem()
		if err == nil && max(m.RSS, m.HWM) > limit {
			p.Kill()
			return max(m.RSS, m.HWM)
		}
	}
}

// FormatAttacks writes one table row per attack result.
func FormatAttacks(w io.Writer, rs ...AttackResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "attack\tconns\tRSS before\tpeak\tgrowth\tRSS after\theap growth\tprobe calls\tprobe ok\tprobe p99\tprobe max\tclient late\tserver late\tnote")
	for _, r := range rs {
		note := ""
		switch {
		case r.Aborted:
			note = "server killed by the memory guard"
		case r.Err != nil:
			note = r.Err.Error()
		}
		var calls, ok int64
		var p99, mx, late time.Duration
		if r.Probe != nil {
			calls, ok, p99, mx, late = r.Probe.Calls, r.Probe.OK, r.Probe.P99, r.Probe.Max, r.Probe.SchedLate
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%v\t%v\t%v\t%v\t%s\n", r.Name, r.Conns, MiB(r.Before.RSS), MiB(r.Peak),
			MiB(r.Growth()), MiB(r.After.RSS), MiB(r.HeapGrowth()), calls, ok, p99.Round(time.Microsecond), mx.Round(time.Microsecond),
			late.Round(time.Microsecond), r.ServerLate.Round(time.Microsecond), note)
	}
	return tw.Flush()
}
