// Package monoclock reads the time from the monotonic clock alone, for hot
// paths that read it per call or per reactor turn: one clock read where
// time.Now makes two (wall and monotonic).
package monoclock

import "time"

// base is the instant Now counts from.
var base = time.Now()

// Now is the time now. Its wall reading is base's moved on by the
// monotonic time since, so times from Now and from time.Now compare and
// subtract as they should within the process; what is checked against
// another host's clock should read time.Now.
func Now() time.Time { return base.Add(time.Since(base)) }
