package embedding

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestCallsTakingLocksTogether runs every kind of call at once: batched
// lookups and updates (which hold up to three shards' locks), saves and
// evictions (one at a time), restores and slot settings (every lock), and
// removes, from several goroutines, a bounded number of calls each. They
// must all finish (a cycle in the order locks are taken would stall
// them), and every row must keep a value for every lookup's id.
func TestCallsTakingLocksTogether(t *testing.T) {
	const dim, workers, calls, batch = 4, 6, 200, 256
	tab := newTable(t, Options{Dim: dim, Slots: []float32{0.1}, FilterFreq: 2})
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			ids, out := make([]int64, batch), make([]float32, batch*dim)
			grads := make([]float32, batch*dim)
			for c := range calls {
				for i := range ids {
					ids[i] = r.Int64N(4 * batch)
				}
				switch (w + c) % 7 {
				case 0, 1, 2:
					if err := tab.Gather(ids, out); err != nil {
						t.Error(err)
						return
					}
				case 3:
					if _, err := tab.ApplyAdagrad(ids, grads, 0.1, int64(c)); err != nil {
						t.Error(err)
						return
					}
				case 4:
					s := tab.Snapshot()
					if w == 0 {
						if err := tab.Restore(s); err != nil {
							t.Error(err)
							return
						}
					}
				case 5:
					tab.Evict(int64(c), 50, 0)
					_ = tab.SetSlotInit(0, 0.1) // refused while rows exist, under every lock
				case 6:
					tab.Remove(ids[:8])
				}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("calls still running after a minute: their locks wait on each other")
	}
	if s := tab.Snapshot(); len(s.Values) != len(s.IDs)*dim {
		t.Fatalf("%d ids with %d values of %d", len(s.IDs), len(s.Values), dim)
	}
}
