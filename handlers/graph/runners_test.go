package graph_test

import (
	"runtime"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/internal/graphtest"
)

// TestRunnersAreReusedAndEnd: a node after another runs on the runner the
// first left idle, not on a new goroutine, and idle runners end.
func TestRunnersAreReusedAndEnd(t *testing.T) {
	graphtest.WaitFor(t, "runners of earlier tests to end", func() bool { return graph.IdleRunners() == 0 })
	goroutines := runtime.NumGoroutine()
	for i := range 20 {
		done := make(chan int)
		graph.GoAsync(func() { done <- runtime.NumGoroutine() })
		if n := <-done; n > goroutines+1 {
			t.Fatalf("node %d ran with %d goroutines, %d before: a runner was not reused", i, n, goroutines)
		}
		graphtest.WaitFor(t, "the runner to park", func() bool { return graph.IdleRunners() == 1 })
	}
	graphtest.WaitFor(t, "the idle runner to end", func() bool { return graph.IdleRunners() == 0 && runtime.NumGoroutine() <= goroutines })
}
