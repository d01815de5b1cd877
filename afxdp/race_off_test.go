//go:build !race

package afxdp_test

// raceEnabled is set when the race detector, which allocates on its own, is on.
const raceEnabled = false
