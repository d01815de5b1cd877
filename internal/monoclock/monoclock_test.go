package monoclock

import (
	"testing"
	"time"
)

// TestNowFollowsTimeNow: Now never runs backwards and stays between the
// time.Now readings around it, so deadlines made from either compare.
func TestNowFollowsTimeNow(t *testing.T) {
	prev := Now()
	for range 1000 {
		before := time.Now()
		now := Now()
		after := time.Now()
		if now.Before(prev) {
			t.Fatalf("Now went back from %v to %v", prev, now)
		}
		if now.Before(before) || now.After(after) {
			t.Fatalf("Now %v outside the time.Now readings %v and %v around it", now, before, after)
		}
		prev = now
	}
}

// TestNanosFollowsNow: Nanos never runs backwards, is never 0, and converts
// to and from the times Now gives.
func TestNanosFollowsNow(t *testing.T) {
	prev := Nanos()
	for range 1000 {
		before := Now()
		n := Nanos()
		after := Now()
		if n <= 0 || n < prev {
			t.Fatalf("Nanos went from %d to %d", prev, n)
		}
		if at := Time(n); at.Before(before) || at.After(after) {
			t.Fatalf("Time(Nanos()) %v outside the Now readings %v and %v around it", at, before, after)
		}
		if back := FromTime(Time(n)); back != n {
			t.Fatalf("FromTime(Time(%d)) = %d", n, back)
		}
		prev = n
	}
}
