package ops

import (
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A sparseGrad is an IndexedSlices gradient: rows values[i] of index
// indices[i]; shape, its dense shape, is nil when the op has none
// (has_known_shape false).
type sparseGrad struct {
	indices, values, shape *wire.Tensor
}

// applySparse adds g, computed at localStep, to a sparse accumulator.
func (a *accumulator) applySparse(localStep int64, g sparseGrad) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if localStep < a.globalStep {
		return nil // stale: dropped, as TensorFlow does, unchecked
	}
	if err := a.checkSparseLocked(g); err != nil {
		return err
	}
	idx := tensor.View[int64](g.indices.Data)
	if a.count == 0 {
		a.sum.Buf.Release()
		a.sum = tensor.Copy(g.values)
		a.idx = append(a.idx[:0], idx...)
		a.rowCount = a.rowCount[:0]
		for range idx {
			a.rowCount = append(a.rowCount, 1)
		}
	} else if err := a.mergeLocked(idx, g.values); err != nil {
		return err
	}
	a.count++
	a.flushLocked()
	return nil
}

// checkSparseLocked checks g as TensorFlow does, in its order and words.
func (a *accumulator) checkSparseLocked(g sparseGrad) error {
	if len(g.indices.Shape) != 1 {
		return status.Errorf(wire.InvalidArgument, "Input indices should be vector but received shape: %s", shapeString(g.indices.Shape))
	}
	nnz := g.indices.Shape[0]
	vals := g.values.Shape
	if len(vals) == 0 {
		return status.Errorf(wire.InvalidArgument, "Values cannot be 0-dimensional.")
	}
	if vals[0] != nnz {
		return status.Errorf(wire.InvalidArgument, "Expected %d non-empty input values, got %d", nnz, vals[0])
	}
	if g.shape != nil {
		dense := tensor.View[int64](g.shape.Data)
		if len(a.shape) > len(dense) {
			return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected shape rank at least %d, got %d", len(a.shape), len(dense))
		}
		for i, d := range a.shape {
			if d != -1 && d != dense[i] {
				return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected shape dim %d to be %d, got %d", i, d, dense[i])
			}
		}
	}
	if len(a.shape) > 0 && a.shape[0] != -1 {
		for i, x := range tensor.View[int64](g.indices.Data) {
			if x >= a.shape[0] {
				return status.Errorf(wire.InvalidArgument, "Shape mismatch: index of slice %d exceeded limits of shape; index is %d exceeded %d", i, x, a.shape[0])
			}
		}
	}
	if a.count > 0 {
		have := a.sum.Shape
		if len(have) != len(vals) {
			return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected values rank %d, got %d", len(have), len(vals))
		}
		for i := 1; i < len(have); i++ {
			if have[i] != vals[i] {
				return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected values dim %d to be %d, got %d", i, have[i], vals[i])
			}
		}
		return nil
	}
	if len(a.shape) > len(vals) {
		return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected values rank at least %d, got %d", len(a.shape), len(vals))
	}
	for i := 1; i < len(a.shape); i++ {
		if a.shape[i] != -1 && a.shape[i] != vals[i] {
			return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected values dim %d to be %d, got %d", i, a.shape[i], vals[i])
		}
	}
	return nil
}

// mergeLocked adds the rows vals of indices idx to the accumulated ones,
// walking both lists as sorted lists are merged: the smaller index goes
// first, equal indices are summed. It is TensorFlow's walk, so unsorted
// lists merge into the rows, in the order, TensorFlow makes of them.
func (a *accumulator) mergeLocked(idx []int64, vals *wire.Tensor) error {
	row := rowBytes(vals)
	acc := a.sum.Data
	n := mergedLen(a.idx, idx)
	shape := append([]int64{int64(n)}, vals.Shape[1:]...)
	out, err := tensor.New(a.dtype, shape)
	if err != nil {
		return err
	}
	outIdx := make([]int64, 0, n)
	outCount := make([]int, 0, n)
	i, j := 0, 0
	for k := 0; k < n; k++ {
		dst := out.Data[k*row : (k+1)*row]
		switch {
		case j == len(idx) || (i < len(a.idx) && a.idx[i] < idx[j]):
			copy(dst, acc[i*row:(i+1)*row])
			outIdx, outCount = append(outIdx, a.idx[i]), append(outCount, a.rowCount[i])
			i++
		case i == len(a.idx) || a.idx[i] > idx[j]:
			copy(dst, vals.Data[j*row:(j+1)*row])
			outIdx, outCount = append(outIdx, idx[j]), append(outCount, 1)
			j++
		default:
			copy(dst, acc[i*row:(i+1)*row])
			a.arith.add(dst, vals.Data[j*row:(j+1)*row])
			outIdx, outCount = append(outIdx, a.idx[i]), append(outCount, a.rowCount[i]+1)
			i++
			j++
		}
	}
	a.sum.Buf.Release()
	a.sum, a.idx, a.rowCount = out, outIdx, outCount
	return nil
}

// mergedLen is the number of rows mergeLocked makes of lists a and b.
func mergedLen(a, b []int64) int {
	i, j, n := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			i++
			j++
		}
		n++
	}
	return n + len(a) - i + len(b) - j
}
