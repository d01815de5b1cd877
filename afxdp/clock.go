package afxdp

import "time"

// clockBase is the instant every reactor of the process reads its clock
// from (monoNow).
var clockBase = time.Now()

// monoNow is the time now, read from the monotonic clock alone: one clock
// read where time.Now makes two (wall and monotonic), and the reactors read
// the clock on every turn that works. Its wall reading is clockBase's moved
// on by the monotonic time since, so it serves the timers, and the
// deadlines endpoints compare (parkUntil, helpDue), as time.Now does; what
// is checked against another host's clock (an OPEN's) reads the wall clock.
func monoNow() time.Time { return clockBase.Add(time.Since(clockBase)) }
