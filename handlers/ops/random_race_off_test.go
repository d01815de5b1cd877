//go:build !race

package ops_test

// raceEnabled says whether the race detector is on.
const raceEnabled = false
