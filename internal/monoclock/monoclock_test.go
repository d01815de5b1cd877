package monoclock

import (
	"testing"
	"testing/synctest"
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

// TestInBubble: inside a synctest bubble the readings start near a second,
// move exactly with the fake clock, and convert to and from the bubble's
// times, so that code timing itself with monoclock runs on fake time.
func TestInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n0 := Nanos()
		if n0 <= 0 || n0 > int64(2*time.Second) {
			t.Fatalf("first reading in a bubble %v, want about a second", time.Duration(n0))
		}
		now0 := Now()
		if !now0.Equal(time.Now()) {
			t.Fatalf("Now %v, time.Now %v", now0, time.Now())
		}
		time.Sleep(90 * time.Minute) // synctest's clock: the time the readings must move by
		if d := Nanos() - n0; d != int64(90*time.Minute) {
			t.Fatalf("Nanos moved %v over 90m of fake time", time.Duration(d))
		}
		if d := Now().Sub(now0); d != 90*time.Minute {
			t.Fatalf("Now moved %v over 90m of fake time", d)
		}
		n := Nanos()
		if !Time(n).Equal(time.Now()) || FromTime(time.Now()) != n {
			t.Fatalf("Time(%d) = %v, FromTime(time.Now()) = %d, time.Now %v", n, Time(n), FromTime(time.Now()), time.Now())
		}
		deadline := time.Now().Add(time.Second)
		if got := FromTime(deadline) - n; got != int64(time.Second) {
			t.Fatalf("a deadline a second on reads %v on", time.Duration(got))
		}
	})
	// Out of the bubble again, Time tells the process's readings from it.
	before := time.Now()
	at := Time(Nanos())
	if after := time.Now(); at.Before(before) || at.After(after) {
		t.Fatalf("after a bubble, Time(Nanos()) %v outside the time.Now readings %v and %v around it", at, before, after)
	}
}
