//go:build race

package afxdprpc_test

// raceOn: the stress test moves gigabytes against deadlines, which the race
// detector multiplies; it runs in the pass without it.
const raceOn = true
