package embedding

import (
	"errors"
	"math"
	"testing"
)

// adamRef is TensorFlow's Adam on one row, in float64.
func adamRef(v, m, s []float64, g []float32, lr, b1, b2, eps, b1p, b2p float64) {
	lrt := lr * math.Sqrt(1-b2p) / (1 - b1p)
	for j := range v {
		gj := float64(g[j])
		m[j] = b1*m[j] + (1-b1)*gj
		s[j] = b2*s[j] + (1-b2)*gj*gj
		v[j] -= lrt * m[j] / (math.Sqrt(s[j]) + eps)
	}
}

// TestAdam checks Adam against the reference over steps, with a row made
// at step 3 starting its moments at their initial values (0), not at
// what another row's moments were (DeepRec's rows left at 1e38), and
// duplicates applied one after the other.
func TestAdam(t *testing.T) {
	const lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
	tab := newTable(t, Options{Dim: 2, Slots: []float32{0, 0}, Init: Initializer{Constant: 0.5}})
	type row struct{ v, m, s []float64 }
	ref := map[int64]*row{}
	b1p, b2p := 1.0, 1.0
	for step := 1; step <= 6; step++ {
		ids := []int64{1, 2, 1}
		if step >= 3 {
			ids = append(ids, 9)
		}
		gather(t, tab, ids...)
		grads := make([]float32, 2*len(ids))
		for i := range grads {
			grads[i] = float32(i%5)*0.3 - 0.5 + float32(step)*0.1
		}
		b1p, b2p = b1p*b1, b2p*b2
		p := AdamParams{LR: lr, Beta1: b1, Beta2: b2, Epsilon: eps, Beta1Power: float32(b1p), Beta2Power: float32(b2p)}
		if n, err := tab.ApplyAdam(0, 1, ids, grads, p, int64(step)); err != nil || n != len(ids) {
			t.Fatalf("step %d: applied %d (%v), want %d", step, n, err, len(ids))
		}
		for i, id := range ids {
			r := ref[id]
			if r == nil {
				r = &row{[]float64{0.5, 0.5}, []float64{0, 0}, []float64{0, 0}}
				ref[id] = r
			}
			adamRef(r.v, r.m, r.s, grads[2*i:2*i+2], lr, b1, b2, eps, float64(float32(b1p)), float64(float32(b2p)))
		}
	}
	for id, got := range rowsOf(tab.Snapshot()) {
		r := ref[id]
		want := append(append(append([]float64{}, r.v...), r.m...), r.s...)
		for j := range want {
			if math.Abs(float64(got[j])-want[j]) > 1e-5*math.Max(1, math.Abs(want[j])) {
				t.Fatalf("row %d: value, m, v %v; want %v", id, got, want)
			}
		}
	}
	if _, err := tab.ApplyAdam(0, 0, []int64{1}, []float32{1, 1}, AdamParams{}, 1); !errors.Is(err, ErrMismatch) {
		t.Fatalf("m and v one slot: %v, want ErrMismatch", err)
	}
}

// TestAdamAllocations checks that Adam on rows that exist allocates
// nothing.
func TestAdamAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers")
	}
	tab := newTable(t, Options{Dim: 16, Slots: []float32{0, 0}})
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(i) * 17
	}
	grads := make([]float32, len(ids)*16)
	gather(t, tab, ids...)
	p := AdamParams{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, Beta1Power: 0.9, Beta2Power: 0.999}
	if a := testing.AllocsPerRun(50, func() { _, _ = tab.ApplyAdam(0, 1, ids, grads, p, 1) }); a != 0 {
		t.Fatalf("ApplyAdam of %d ids: %v allocations, want 0", len(ids), a)
	}
}
