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
// (starwire train's examples/s, old and new builds alternating). A task run
// alone (starwire serve) keeps the runtime's own count.
//
// When a task's AF_XDP reactor busy-polls (*_ENABLE_POLLING=true), the
// cluster takes one P more for each such reactor: a spinning reactor
// never parks, so it holds a P for good, and without one more the tasks'
// network goroutines would again wait for a kernel's run. Reactors that
// poll adaptively (the default) park when idle and take no P of their
// own: a P for them only doubled the context switches (perf stat of
// starwire train).
type spareProc struct {
	Before, After int
	CPUs          int
	// Reactors is the number of Ps added for spinning AF_XDP reactors.
	Reactors int
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

// addReactorProcs raises GOMAXPROCS by spinning, one P for each spinning
// AF_XDP reactor of the cluster's tasks, unless the environment sets it;
// only the first call counts, and the undo function of addSpareProc
// undoes both.
func (p *spareProc) addReactorProcs(spinning int) {
	if p.Set != "" || p.Reactors > 0 || spinning <= 0 {
		return
	}
	p.Reactors = spinning
	p.After += spinning
	runtime.GOMAXPROCS(p.After)
}

// String says what the local cluster runs with, for the job's header.
func (p spareProc) String() string {
	if p.Set != "" {
		return fmt.Sprintf("GOMAXPROCS %d, as the environment sets it", p.After)
	}
	if p.Reactors > 0 {
		return fmt.Sprintf("GOMAXPROCS %d on %d CPUs (one spare for the tasks' network goroutines, %d for their spinning AF_XDP reactors; GOMAXPROCS sets it)", p.After, p.CPUs, p.Reactors)
	}
	return fmt.Sprintf("GOMAXPROCS %d on %d CPUs (one spare for the tasks' network goroutines; GOMAXPROCS sets it)", p.After, p.CPUs)
}
