// Package writecount counts the TCP transport's writes and the frames they
// carry, for benchmarks that report frames per write (how well batching
// works). Counting is off unless a benchmark turns it on: in production
// each write costs one load of a flag nothing writes.
package writecount

import "sync/atomic"

var (
	on             atomic.Bool
	writes, frames atomic.Uint64
)

// Enable turns counting on for the rest of the process. Counts start
// from the writes after it: call it before taking the first Read.
func Enable() { on.Store(true) }

// Add records one write that carried n frames, when counting is on.
func Add(n int) {
	if on.Load() {
		writes.Add(1)
		frames.Add(uint64(n))
	}
}

// Read returns the writes and frames counted since Enable.
func Read() (w, f uint64) { return writes.Load(), frames.Load() }
