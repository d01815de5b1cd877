package stress

import (
	"testing"
	"time"
)

// TestWatchLate checks what holds on any machine (how late it runs
// goroutines is the machine's): the measure is never negative, stop may
// be called twice and answers the same, and the watcher ends with it
// (goleak would not see it: this package has no TestMain; stop waits for
// it instead).
func TestWatchLate(t *testing.T) {
	stop := WatchLate()
	time.Sleep(20 * time.Millisecond) // lets the watcher take a few samples
	late := stop()
	if late < 0 {
		t.Fatalf("lateness %v", late)
	}
	if again := stop(); again != late {
		t.Fatalf("stop returned %v, then %v", late, again)
	}
	t.Logf("woken up to %v late", late)
}
