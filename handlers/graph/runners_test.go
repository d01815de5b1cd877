package graph_test

import (
	"bytes"
	"runtime"
	"testing"

	"go.uber.org/goleak"

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
// first left idle, not on a new goroutine, and idle runners end.
func TestRunnersAreReusedAndEnd(t *testing.T) {
	testwait.Eventually(t, graphtest.Settle, func() bool { return graph.IdleRunners() == 0 }, "runners of earlier tests to end")
	before := goleak.IgnoreCurrent()
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
		testwait.Eventually(t, graphtest.Settle, func() bool { return graph.IdleRunners() == 1 }, "the runner to park")
	}
	testwait.Eventually(t, graphtest.Settle, func() bool { return graph.IdleRunners() == 0 }, "the idle runner to end")
	testwait.VerifyNone(t, before)
}
