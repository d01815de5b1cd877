//go:build !race

package stress_test

const raceOn = false
