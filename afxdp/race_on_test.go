//go:build race

package afxdp_test

// raceEnabled is set when the race detector, which allocates on its own, is on.
//
// The tests that carry a 64 MiB tensor over a lossy path carry 4 MiB
// under it, as afxdprpc's do (see its raceOn): what it checks is how
// goroutines interleave, which the first megabytes exercise as much as
// the last, while every byte it watches costs it tens of times more CPU.
const raceEnabled = true
