package testwait

import (
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// fakeT records a Fatalf instead of ending the test, so that the failing
// paths can be checked; its Fatalf does not return either.
type fakeT struct {
	testing.TB
	failed string
}

type fatal struct{}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(fatal{})
}

// failure runs wait and returns the message it failed with, "" if none.
func failure(t *testing.T, wait func(f *fakeT)) (msg string) {
	f := &fakeT{TB: t}
	defer func() {
		if r := recover(); r != nil && r != (fatal{}) {
			panic(r)
		}
		msg = f.failed
	}()
	wait(f)
	return ""
}

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trueAt  time.Duration // when cond starts returning true; <0: never
		timeout time.Duration
		want    bool
	}{
		{"at once", 0, time.Second, true},
		{"before the deadline", 300 * time.Millisecond, time.Second, true},
		{"never", -1, time.Second, false},
		{"after the deadline", 2 * time.Second, time.Second, false},
		{"zero timeout, true", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var polls int
				got := Until(tc.timeout, func() bool {
					polls++
					return tc.trueAt >= 0 && time.Since(start) >= tc.trueAt
				})
				if got != tc.want {
					t.Fatalf("Until = %v, want %v", got, tc.want)
				}
				took := time.Since(start)
				if took > tc.timeout {
					t.Errorf("took %v, timeout %v", took, tc.timeout)
				}
				// Backing off: a second's wait is a few hundred polls, not
				// a spin.
				if limit := 20 + int(tc.timeout/minPoll)/50; polls > limit {
					t.Errorf("%d polls in %v, want at most %d", polls, took, limit)
				}
			})
		})
	}
}

func TestUntilSeesLateCondition(t *testing.T) {
	// A condition made true by another goroutine is seen within the
	// longest poll interval.
	synctest.Test(t, func(t *testing.T) {
		var flag atomic.Bool
		time.AfterFunc(100*time.Millisecond, func() { flag.Store(true) })
		start := time.Now()
		if !Until(time.Second, flag.Load) {
			t.Fatal("Until missed the flag")
		}
		if took := time.Since(start); took > 100*time.Millisecond+maxPoll {
			t.Fatalf("saw the flag after %v, set at 100ms", took)
		}
	})
}

func TestEventuallyFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := failure(t, func(f *fakeT) { Eventually(f, time.Second, func() bool { return false }, "the %s", "thing") })
		if want := "testwait: not within 1s: the thing"; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	})
}

func TestRecv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ch := make(chan int, 1)
		time.AfterFunc(time.Millisecond, func() { ch <- 7 })
		if got := Recv(t, time.Second, ch, "seven"); got != 7 {
			t.Fatalf("Recv = %d, want 7", got)
		}

		got := failure(t, func(f *fakeT) { Recv(f, time.Second, make(chan int), "nothing") })
		if want := "testwait: not within 1s: nothing"; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
		closed := make(chan int)
		close(closed)
		got = failure(t, func(f *fakeT) { Recv(f, time.Second, closed, "a value") })
		if want := "testwait: channel closed while waiting for a value"; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	})
}

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		go func() {
			for range 10 {
				<-tick.C
				n.Add(1)
			}
		}()
		if got := For(t, time.Second, n.Load, func(v int64) bool { return v >= 5 }, "five ticks"); got < 5 {
			t.Fatalf("For returned %d, before the condition held", got)
		}
		got := failure(t, func(f *fakeT) {
			For(f, time.Second, n.Load, func(v int64) bool { return v > 10 }, "%s ticks", "eleven")
		})
		if want := "testwait: not within 1s: eleven ticks; last 10"; got != want {
			t.Fatalf("message %q, want %q", got, want)
		}
	})
}
