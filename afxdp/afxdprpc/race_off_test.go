//go:build !race

package afxdprpc_test

const raceOn = false
