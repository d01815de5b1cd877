//go:build !race

package link_test

// raceEnabled is set when the race detector, which allocates on its own, is on.
const raceEnabled = false
