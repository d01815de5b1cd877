package graph_test

import (
	"bytes"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/internal/testwait"
)

// goroutineID returns the running goroutine's number, from the first line
// of its stack ("goroutine 7 [running]:"), so that the test can tell which
// goroutine ran a node.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// TestRunnersAreReusedAndEnd: a node after another runs on the runner the
// first left idle, not on a new goroutine, and idle runners end. It runs
// on synctest's clock: a runner idle for 20ms of real time ends, which a
// loaded machine could let happen before the test looked, or before the
// next node came.
func TestRunnersAreReusedAndEnd(t *testing.T) {
	// Runners of earlier tests are outside the bubble, and a node handed
	// to one would leave it.
	testwait.Eventually(t, graphtest.Settle, func() bool { return graph.IdleRunners() == 0 }, "runners of earlier tests to end")
	synctest.Test(t, func(t *testing.T) {
		var first string
		for i := range 20 {
			done := make(chan string)
			graph.GoAsync(func() { done <- goroutineID() })
			id := <-done
			if i == 0 {
				first = id
			} else if id != first {
				t.Fatalf("node %d ran on goroutine %s, the first on %s: a runner was not reused", i, id, first)
			}
			synctest.Wait() // the runner has parked, or ended
			if n := graph.IdleRunners(); n != 1 {
				t.Fatalf("after node %d, %d idle runners, want the one that ran it", i, n)
			}
		}
		time.Sleep(time.Minute) // synctest's clock: past any runner's idle time
		synctest.Wait()
		if n := graph.IdleRunners(); n != 0 {
			t.Fatalf("%d idle runners a minute after the last node, want none", n)
		}
		// synctest.Test fails if the runner is still blocked when this
		// returns: it must have ended, not only left the idle list.
	})
}
