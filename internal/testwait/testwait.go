// Package testwait waits, in tests, for something another goroutine brings
// about: a counter reaching a value, a session being accepted, a goroutine
// parking. A test that checks such a state at once, or after a fixed
// sleep, holds only when goroutines run promptly, and fails on a loaded
// machine; one that waits forever hangs the suite instead of saying what
// it waited for. Every wait here is bounded in time and in the number of
// polls, backs off from tens of microseconds to a few milliseconds so that
// it neither spins a core nor adds latency to a fast run, and fails with a
// message naming what did not happen.
//
// Polling is for states nothing signals. Where the code under test can
// say when something happened (a channel, a hook, a handshake), wait on
// that instead; where time itself is the subject, use testing/synctest,
// under which these waits run on the bubble's fake clock.
package testwait

import (
	"fmt"
	"testing"
	"time"
)

// The backoff between polls: it starts short, so that a condition made
// true a moment later is seen a moment later, and grows to maxPoll, so
// that a long wait costs little CPU on a machine other tests share.
const (
	minPoll = 50 * time.Microsecond
	maxPoll = 5 * time.Millisecond
)

// Until polls cond, backing off between polls, until it returns true or
// timeout has passed, and reports whether it returned true. cond is
// always called at least once, and once more after the deadline, so that
// a wait whose poller was descheduled past it is not failed for that.
// It does not need a testing.TB, so it may run in a goroutine other than
// the test's, such as a hook called by the code under test.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for poll := minPoll; ; poll = min(2*poll, maxPoll) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return cond()
		}
		time.Sleep(min(poll, max(time.Until(deadline), 0)))
	}
}

// Eventually fails t at once (t.Fatalf) unless cond returns true within
// timeout; format and args say what was awaited. It must be called from
// the test's goroutine.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("testwait: not within %v: %s", timeout, fmt.Sprintf(format, args...))
	}
}

// For polls get until cond holds of the value it returns, and returns
// that value; it fails t at once (t.Fatalf) if cond does not hold within
// timeout, with format and args saying what was awaited and the last value
// got. It suits counters and stats read as a whole: the caller checks
// more of the value it returns. It must be called from the test's
// goroutine.
func For[T any](t testing.TB, timeout time.Duration, get func() T, cond func(T) bool, format string, args ...any) T {
	t.Helper()
	var v T
	if !Until(timeout, func() bool { v = get(); return cond(v) }) {
		t.Fatalf("testwait: not within %v: %s; last %+v", timeout, fmt.Sprintf(format, args...), v)
	}
	return v
}

// Recv returns the next value from ch, failing t at once (t.Fatalf) if
// none arrives within timeout or ch is closed; format and args say what
// was awaited. It must be called from the test's goroutine.
func Recv[T any](t testing.TB, timeout time.Duration, ch <-chan T, format string, args ...any) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("testwait: channel closed while waiting for %s", fmt.Sprintf(format, args...))
		}
		return v
	case <-timer.C:
		t.Fatalf("testwait: not within %v: %s", timeout, fmt.Sprintf(format, args...))
	}
	var zero T
	return zero
}
