package compute_test

import (
	"runtime"
	"testing"

	"github.com/starwire/starwire/handlers/compute"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/internal/testwait"
)

// TestBound: with every token taken, the next Acquire waits until a
// Release, which hands it the token.
func TestBound(t *testing.T) {
	l := compute.New(2)
	l.Acquire()
	l.Acquire()
	if l.Held() != 2 || l.Cap() != 2 {
		t.Fatalf("held %d of %d, want 2 of 2", l.Held(), l.Cap())
	}
	got := make(chan struct{})
	go func() { l.Acquire(); close(got) }()
	testwait.Eventually(t, Settle, func() bool { return l.Waiting() == 1 }, "the third Acquire to wait")
	select {
	case <-got:
		t.Fatal("a third goroutine took a token while two were held")
	default:
	}
	l.Release()
	<-got
	if l.Held() != 2 || l.Waiting() != 0 {
		t.Fatalf("held %d, %d waiting; want 2 held, none waiting", l.Held(), l.Waiting())
	}
	l.Release()
	l.Release()
	if l.Held() != 0 {
		t.Fatalf("held %d after every release", l.Held())
	}
}

// TestYieldServesWaiter: a holder that yields lets a waiter compute before
// it takes a token again.
func TestYieldServesWaiter(t *testing.T) {
	l := compute.New(1)
	l.Acquire()
	order := make(chan string, 2)
	go func() {
		l.Acquire()
		order <- "waiter"
		l.Release()
	}()
	testwait.Eventually(t, Settle, func() bool { return l.Waiting() == 1 }, "the waiter")
	l.Yield()
	order <- "holder"
	l.Release()
	if first := <-order; first != "waiter" {
		t.Fatalf("%s computed first after Yield, want the waiter", first)
	}
}

// TestNilLimit: a nil Limit bounds nothing.
func TestNilLimit(t *testing.T) {
	var l *compute.Limit
	for range 3 {
		l.Acquire()
	}
	l.Yield()
	l.Release()
	if l.Cap() != 0 || l.Held() != 0 || l.Waiting() != 0 {
		t.Fatal("a nil Limit reports tokens")
	}
}

// TestProcessBoundsByCPUs: the process's limit has one token per CPU, and
// no more than the Ps the runtime started with.
func TestProcessBoundsByCPUs(t *testing.T) {
	if n := compute.Process.Cap(); n < 1 || n > runtime.NumCPU() {
		t.Fatalf("Process has %d tokens on %d CPUs", n, runtime.NumCPU())
	}
}
