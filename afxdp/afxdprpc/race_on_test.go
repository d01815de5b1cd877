//go:build race

package afxdprpc_test

// raceOn: the stress test moves gigabytes against deadlines, which the race
// detector multiplies; it runs in the pass without it.
//
// checkRPC's tensor is 4 MiB at most under it, on every path. What it
// checks is how goroutines interleave, which the first megabytes exercise
// as much as the last; every byte it watches costs it tens of times more
// CPU, so that 64 MiB took minutes on a loaded 2-core machine and reached
// keepalive's 20s timeout over a lossy path (TestRPCOverUDPImpaired,
// TestRPCOverXSKImpaired), and the clean paths' 64 MiB was most of the
// race pass's CPU in this package. The pass without it carries the full
// sizes.
const raceOn = true
