//go:build race

package stress_test

// raceOn: the stress tests move gigabytes and measure memory and time,
// which the race detector multiplies; they run in the pass without it.
const raceOn = true
