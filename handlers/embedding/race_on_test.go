//go:build race

package embedding

// raceEnabled says whether the race detector is on: it makes sync.Pool
// drop what is put back, so allocation counts are not the program's.
const raceEnabled = true
