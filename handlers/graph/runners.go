package graph

import (
	"time"

	"github.com/starwire/starwire/internal/parked"
)

// Asynchronous nodes (a remote _Recv, one that waits for another node's
// send) run on goroutines kept from one step to the next: a goroutine
// started for each such node grew a fresh stack to the depth of an RPC on
// every step, and copying stacks was a few percent of a training job's
// CPU. A runner that has been idle for runnerIdle ends, so that a graph
// that stops running leaves none behind for long.
const (
	runnerIdle     = 20 * time.Millisecond
	maxIdleRunners = 256
)

var runners = parked.Pool[func()]{Run: func(f func()) { f() }, Max: maxIdleRunners, Idle: runnerIdle}

// goAsync runs f on an idle runner, or on a new one.
func goAsync(f func()) { runners.Go(f) }
