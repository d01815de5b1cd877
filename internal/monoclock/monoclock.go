// Package monoclock reads the time from the monotonic clock alone, for hot
// paths that read it per call or per reactor turn: one clock read where
// time.Now makes two (wall and monotonic). Nanos gives the reading as an
// integer, for code that keeps many times and compares them often: adding
// to and comparing int64s costs less than doing so with time.Time.
package monoclock

import (
	"sync/atomic"
	"time"
)

// base is the instant Nanos counts from: a second before the package was
// initialised, so that no reading is 0 and 0 can stand for no time.
var base = time.Now().Add(-time.Second)

// bubbleBase is the instant Nanos counts from inside a testing/synctest
// bubble, a second before the bubble's fake clock starts (midnight UTC,
// 1 January 2000). time.Now there reads the fake clock without a
// monotonic reading, so time.Since(base) is the fake wall time less
// base's real one: negative, since base is later than 2000. Every
// function here then counts from bubbleBase instead, so that a test in a
// bubble sees readings from a second up, moving with the fake clock.
var bubbleBase = time.Date(2000, 1, 1, 0, 0, -1, 0, time.UTC)

// bubbled records that a reading was once taken in a synctest bubble, so
// that Time, on hot paths, reads the clock to tell where it runs only in
// a process that has run a bubble: a test binary.
var bubbled atomic.Bool

// origin is the instant readings count from: base, or bubbleBase in a
// synctest bubble. It costs a clock read.
func origin() time.Time {
	if time.Since(base) < 0 {
		bubbled.Store(true)
		return bubbleBase
	}
	return base
}

// Now is the time now. Its wall reading is base's moved on by the
// monotonic time since, so times from Now and from time.Now compare and
// subtract as they should within the process; what is checked against
// another host's clock should read time.Now.
func Now() time.Time {
	if d := time.Since(base); d >= 0 {
		return base.Add(d)
	}
	return time.Now()
}

// Nanos is the monotonic time now, in nanoseconds from an origin that is
// the same for the whole process (or synctest bubble). It is never 0 (nor
// negative).
func Nanos() int64 {
	if d := time.Since(base); d >= 0 {
		return int64(d)
	}
	bubbled.Store(true)
	return int64(time.Since(bubbleBase))
}

// Time is the time of a reading of Nanos, as Now would have returned it.
// It reads the clock, to tell a bubble's readings from the process's,
// only once a bubble was seen: a reading taken in one came from Nanos or
// FromTime, which set bubbled. Elsewhere it costs what base.Add does.
func Time(nanos int64) time.Time {
	if !bubbled.Load() {
		return base.Add(time.Duration(nanos))
	}
	return origin().Add(time.Duration(nanos))
}

// FromTime is the reading of Nanos at t, which is a time of this process
// (from Now or time.Now). Times before the origin give readings below 1.
func FromTime(t time.Time) int64 { return int64(t.Sub(origin())) }
