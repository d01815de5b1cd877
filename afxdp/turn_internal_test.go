package afxdp

import (
	"slices"
	"testing"
)

// TestIdleTurnsPumpOnceAFullTurn walks the reactor's loop through idle
// spells: the first turn after work and every idleFullEvery-th idle one run
// the timers and transmit queues, the others do not.
func TestIdleTurnsPumpOnceAFullTurn(t *testing.T) {
	var tr turn
	for spell := range 3 {
		var full []int
		for i := range 3*idleFullEvery + spell {
			if tr.pumps() {
				full = append(full, i)
			}
			tr.idle()
		}
		want := []int{0, idleFullEvery, 2 * idleFullEvery}
		if spell > 0 {
			want = append(want, 3*idleFullEvery)
		}
		if !slices.Equal(full, want) {
			t.Fatalf("spell %d: full turns %v, want %v", spell, full, want)
		}
		tr.worked()
	}
}
