package main

import (
	"fmt"
	"os"
	"runtime"
)

// A spareProc is the Go runtime's processor count (GOMAXPROCS) as a local
// cluster runs with it: one more than the runtime would take by itself.
//
// The local cluster runs every task in this one runtime, so the parameter
// server's Adagrad, the workers' op kernels and their input pipelines
// share its Ps with the goroutines that read requests and answers. Go
// looks at the network only when a P runs out of work, and preempts a
// running goroutine only after 10 ms: with one P per CPU, an answer on the
// step's critical path waits until some kernel's run ends. With one P more,
// the thread that takes the woken goroutine competes for a CPU in the
// kernel's scheduler, which preempts at once, so the step waits less
// (BENCHMARKS.md, "Issue 11: a spare P for the local cluster"). A task run
// alone (starwire serve) keeps the runtime's own count.
//
// When the tasks talk over AF_XDP, the cluster takes one P more: the
// reactors of its AF_XDP endpoints poll their rings and yield between
// polls, and a goroutine that yields keeps a P busy, which then does not
// look at the network either; with the second spare P the job ran faster
// where --afxdp off did not (BENCHMARKS.md, "Issue 11: a compute bound
// beside the spare P").
type spareProc struct {
	Before, After int
	CPUs          int
	// Reactors is set when a P was added for AF_XDP reactors.
	Reactors bool
	// Set is the GOMAXPROCS variable's value when the user set it: it is
	// then left as it is.
	Set string
}

// addSpareProc raises GOMAXPROCS by one unless the environment sets it,
// and returns what it did and how to undo it.
func addSpareProc() (spareProc, func()) {
	p := spareProc{Before: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), Set: os.Getenv("GOMAXPROCS")}
	p.After = p.Before
	if p.Set != "" {
		return p, func() {}
	}
	p.After = p.Before + 1
	runtime.GOMAXPROCS(p.After)
	return p, func() { runtime.GOMAXPROCS(p.Before) }
}

// addReactorProc raises GOMAXPROCS by one more, for the AF_XDP reactors of
// the cluster's tasks, unless the environment sets it; the undo function
// of addSpareProc undoes both.
func (p *spareProc) addReactorProc() {
	if p.Set != "" || p.Reactors {
		return
	}
	p.Reactors = true
	p.After++
	runtime.GOMAXPROCS(p.After)
}

// String says what the local cluster runs with, for the job's header.
func (p spareProc) String() string {
	if p.Set != "" {
		return fmt.Sprintf("GOMAXPROCS %d, as the environment sets it", p.After)
	}
	if p.Reactors {
		return fmt.Sprintf("GOMAXPROCS %d on %d CPUs (one spare for the tasks' network goroutines, one for their AF_XDP reactors; GOMAXPROCS sets it)", p.After, p.CPUs)
	}
	return fmt.Sprintf("GOMAXPROCS %d on %d CPUs (one spare for the tasks' network goroutines; GOMAXPROCS sets it)", p.After, p.CPUs)
}
