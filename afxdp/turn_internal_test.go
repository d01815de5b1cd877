package afxdp

import (
	"slices"
	"testing"

	"github.com/starwire/starwire/afxdp/protocol"
)

// TestIdleTurnsReadTheClockOnceAFullTurn walks the reactor's loop through
// idle spells: the first turn after work and every idleFullEvery-th idle
// one read the clock and pump, the others do neither; a turn that works
// reads the clock once however often it asks.
func TestIdleTurnsReadTheClockOnceAFullTurn(t *testing.T) {
	env := &protocol.Env{}
	var tr turn
	for spell := range 3 {
		var clocked []int
		for i := range 3 * idleFullEvery {
			env.Now = 0
			tr.start(env)
			if tr.pumps() != (env.Now != 0) {
				t.Fatalf("spell %d, turn %d: pumps %v with the clock read: %v", spell, i, tr.pumps(), env.Now != 0)
			}
			if tr.pumps() {
				clocked = append(clocked, i)
			}
			tr.idle()
		}
		wantClocked := []int{0, idleFullEvery, 2 * idleFullEvery}
		if !slices.Equal(clocked, wantClocked) {
			t.Fatalf("spell %d: clock read on turns %v, want %v", spell, clocked, wantClocked)
		}
		// Work in the middle of a spell: this turn reads the clock, once.
		tr.start(env)
		tr.idle()
		tr.start(env)
		if tr.pumps() {
			t.Fatalf("spell %d: an idle turn between full ones pumps", spell)
		}
		tr.clock(env)
		first := env.Now
		tr.clock(env)
		if env.Now != first || !tr.pumps() {
			t.Fatalf("spell %d: a working turn read the clock twice (%v, %v) or does not pump (%v)", spell, first, env.Now, tr.pumps())
		}
		tr.worked()
	}
}
