//go:build !race

package rpc_test

const raceOn = false
