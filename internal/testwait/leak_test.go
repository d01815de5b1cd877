package testwait

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { VerifyTestMain(m) }

// TestFindLeaksWaitsForExits: a goroutine that ends a while after the
// check starts, longer than goleak.Find alone waits, is not a leak.
func TestFindLeaksWaitsForExits(t *testing.T) {
	before := goleak.IgnoreCurrent()
	release := make(chan struct{})
	done := make(chan struct{})
	go func() { <-release; close(done) }()
	// paces the goroutine's exit past goleak.Find's own retries (about a second)
	time.AfterFunc(1500*time.Millisecond, func() { close(release) })
	if err := FindLeaks(LeakSettle, before); err != nil {
		t.Fatalf("a goroutine that ends was reported: %v", err)
	}
	<-done
}

// TestFindLeaksReportsLeaks: a goroutine that never ends is reported,
// once the timeout has passed.
func TestFindLeaksReportsLeaks(t *testing.T) {
	before := goleak.IgnoreCurrent()
	stop := make(chan struct{})
	defer close(stop)
	go func() { <-stop }()
	err := FindLeaks(100*time.Millisecond, before)
	if err == nil || !strings.Contains(err.Error(), "TestFindLeaksReportsLeaks") {
		t.Fatalf("a blocked goroutine was not reported: %v", err)
	}
}
