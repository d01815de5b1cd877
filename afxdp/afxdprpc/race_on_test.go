//go:build race

package afxdprpc_test

// raceOn: the stress test moves gigabytes against deadlines, which the race
// detector multiplies; it runs in the pass without it.
//
// The tests that carry a 64 MiB tensor over a lossy path carry 4 MiB
// under it. What it checks is how goroutines interleave, which the first
// megabytes exercise as much as the last; every byte it watches costs it
// tens of times more CPU, so that 64 MiB took minutes on a loaded 2-core
// machine and reached keepalive's 20s timeout (TestRPCOverUDPImpaired,
// TestRPCOverXSKImpaired). The pass without it carries the full 64 MiB.
const raceOn = true
