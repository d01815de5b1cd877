package graph

import (
	"runtime"
	"testing"
	"time"
)

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func idleRunners() int { return runners.Parked() }

// TestRunnersAreReusedAndEnd: a node after another runs on the runner the
// first left idle, not on a new goroutine, and idle runners end.
func TestRunnersAreReusedAndEnd(t *testing.T) {
	waitFor(t, "runners of earlier tests to end", func() bool { return idleRunners() == 0 })
	goroutines := runtime.NumGoroutine()
	for i := range 20 {
		done := make(chan int)
		goAsync(func() { done <- runtime.NumGoroutine() })
		if n := <-done; n > goroutines+1 {
			t.Fatalf("node %d ran with %d goroutines, %d before: a runner was not reused", i, n, goroutines)
		}
		waitFor(t, "the runner to park", func() bool { return idleRunners() == 1 })
	}
	waitFor(t, "the idle runner to end", func() bool { return idleRunners() == 0 && runtime.NumGoroutine() <= goroutines })
}
