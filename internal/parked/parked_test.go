package parked

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

func runFunc(f func()) { f() }

// TestReusedAndEnd: a job after another runs on the goroutine the first
// left parked, not on a new one, and a parked goroutine ends once Idle has
// passed without a job.
func TestReusedAndEnd(t *testing.T) {
	p := &Pool[func()]{Run: runFunc, Max: 4, Idle: 20 * time.Millisecond}
	goroutines := runtime.NumGoroutine()
	for i := range 20 {
		done := make(chan int)
		p.Go(func() { done <- runtime.NumGoroutine() })
		if n := <-done; n > goroutines+1 {
			t.Fatalf("job %d ran with %d goroutines, %d before: a parked one was not reused", i, n, goroutines)
		}
		waitFor(t, "the goroutine to park", func() bool { return p.Parked() == 1 })
	}
	waitFor(t, "the parked goroutine to end", func() bool { return p.Parked() == 0 && runtime.NumGoroutine() <= goroutines })
}

// TestMaxAndClose: after a burst, at most Max goroutines stay parked,
// without Idle until Close, which ends them; a job after Close still runs.
func TestMaxAndClose(t *testing.T) {
	p := &Pool[func()]{Run: runFunc, Max: 3}
	goroutines := runtime.NumGoroutine()
	release := make(chan struct{})
	started := make(chan struct{})
	for range 8 {
		p.Go(func() { started <- struct{}{}; <-release })
	}
	for range 8 {
		<-started
	}
	close(release)
	waitFor(t, "the burst to end", func() bool { return runtime.NumGoroutine() <= goroutines+3 && p.Parked() == 3 })
	time.Sleep(10 * time.Millisecond) // no Idle: they stay
	if n := p.Parked(); n != 3 {
		t.Fatalf("%d parked after a pause, want 3", n)
	}
	p.Close()
	waitFor(t, "Close to end the parked goroutines", func() bool { return runtime.NumGoroutine() <= goroutines })
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	waitFor(t, "the goroutine of a job after Close to end", func() bool { return p.Parked() == 0 && runtime.NumGoroutine() <= goroutines })
}
