//go:build race

package ops

// raceEnabled says whether the race detector is on.
const raceEnabled = true
