package embedding

import (
	"fmt"
	"math"
)

// AdamParams are the scalars of one Adam update: the learning rate, the
// moments' decay rates Beta1 and Beta2, Epsilon, and Beta1Power and
// Beta2Power, the decay rates raised to the step's count (TensorFlow's
// Adam keeps them in variables of their own).
type AdamParams struct {
	LR, Beta1, Beta2, Epsilon float32
	Beta1Power, Beta2Power    float32
}

// ApplyAdam updates the rows of ids with their gradients grads,
// len(ids)*Dim floats, as TensorFlow's Adam does, slot m being the first
// moment and slot v the second, kept beside each row (so that a row made
// on first lookup starts with its moments at their initial values and a
// snapshot saves them with the row): for each id in order,
//
//	m = beta1*m + (1-beta1)*g
//	v = beta2*v + (1-beta2)*g*g
//	value -= lr*sqrt(1-beta2_power)/(1-beta1_power) * m/(sqrt(v)+epsilon)
//
// and the row's version becomes step. Gradients of ids without a row are
// dropped. It returns the number of gradients applied.
func (t *Table) ApplyAdam(m, v int, ids []int64, grads []float32, p AdamParams, step int64) (int, error) {
	d := t.opts.Dim
	if len(grads) != len(ids)*d {
		return 0, fmt.Errorf("embedding: %d gradient floats for %d ids of %d: %w", len(grads), len(ids), d, ErrMismatch)
	}
	if n := len(t.opts.Slots); m < 0 || m >= n || v < 0 || v >= n || m == v {
		return 0, fmt.Errorf("embedding: Adam's moments are slots %d and %d, the table has %d: %w", m, v, n, ErrMismatch)
	}
	lr := float64(p.LR) * math.Sqrt(1-float64(p.Beta2Power)) / (1 - float64(p.Beta1Power))
	b1, b2, eps := p.Beta1, p.Beta2, float64(p.Epsilon)
	applied := 0
	t.each(ids, true, func(sh *shard, i int, r int32) {
		if r < 0 {
			return
		}
		g := grads[i*d : (i+1)*d]
		val, mm, vv := t.val(sh, r), t.slot(sh, r, m), t.slot(sh, r, v)
		for j, gj := range g {
			mm[j] = b1*mm[j] + (1-b1)*gj
			vv[j] = b2*vv[j] + (1-b2)*gj*gj
			val[j] -= float32(lr * float64(mm[j]) / (math.Sqrt(float64(vv[j])) + eps))
		}
		*t.version(sh, r) = step
		applied++
	})
	return applied, nil
}
