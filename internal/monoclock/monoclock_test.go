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
