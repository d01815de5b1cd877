package ops

import (
	"context"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// An accumulator is TensorFlow's conditional accumulator, the resource of
// ConditionalAccumulator, ResourceConditionalAccumulator and
// SparseConditionalAccumulator: SyncReplicasOptimizer keeps one per
// variable on the variable's ps, every worker applies its gradient to it,
// and the chief takes their average once enough arrived.
//
//   - apply adds a gradient computed at localStep, unless it is stale
//     (localStep < globalStep), which is dropped without an error.
//   - take waits until at least need gradients were added since the last
//     take, then returns their mean (or sum), starts counting anew and
//     advances globalStep by one. Takes are served in the order they came.
//   - setGlobalStep sets globalStep (to the real global step, when the
//     chief starts).
//
// A dense accumulator sums whole tensors. A sparse one sums IndexedSlices
// as TensorFlow's SparseConditionalAccumulator does: the rows of a new
// gradient are merged into the accumulated ones as if both were sorted by
// index, summing rows of equal index, and each row keeps the number of
// gradients it sums; the mean divides each row by its own count. Indices
// that are not sorted (an embedding's gradient never is) are merged the
// same way, so the rows come out in TensorFlow's order.
//
// All fields after mu are guarded by it.
type accumulator struct {
	name   string
	sparse bool
	dtype  wire.DataType
	shape  []int64 // the gradients' (partial) shape; nil: unknown rank
	mean   bool    // reduction_type MEAN, else SUM
	arith  accumArith

	mu         sync.Mutex
	globalStep int64
	count      int         // gradients added since the last take
	sum        wire.Tensor // their sum, owned; sparse: the rows of idx
	idx        []int64     // sparse: the index of each row of sum
	rowCount   []int       // sparse: how many gradients each row sums
	takers     []*takeAttempt
	dropped    bool
}

func (a *accumulator) resourceName() string { return a.name }

// A takeAttempt is a take waiting for its gradients. Once done is closed,
// out (or err) is its result, owned by the taker.
type takeAttempt struct {
	need int
	done chan struct{}
	out  takeResult
	err  error
}

// takeResult is what take returns: the average (dense), or the indices,
// values and dense shape of the averaged IndexedSlices (sparse).
type takeResult struct {
	indices, values, shape wire.Tensor
}

// accumArith is an accumulator's arithmetic on its dtype.
type accumArith struct {
	add    func(dst, src []byte)   // dst += src, elementwise
	divide func(dst []byte, n int) // dst /= n
}

func accumArithFor[T floating]() accumArith {
	return accumArith{
		add: func(dst, src []byte) {
			d, s := tensor.View[T](dst), tensor.View[T](src)
			s = s[:len(d)]
			for i := range d {
				d[i] += s[i]
			}
		},
		divide: func(dst []byte, n int) {
			d, by := tensor.View[T](dst), T(n)
			for i := range d {
				d[i] /= by
			}
		},
	}
}

// accumTable holds the dtypes TensorFlow registers accumulators for on a
// CPU, less half.
var accumTable = floatTable(accumArithFor[float32](), accumArithFor[float64]())

// errTakeCancelled is what a take whose step ended answers.
func errTakeCancelled() error {
	return status.Errorf(wire.Cancelled, "TakeGrad operation was cancelled")
}

// setGlobalStep sets the step below which gradients are stale. TensorFlow
// lets it go backwards (with a warning in its log).
func (a *accumulator) setGlobalStep(step int64) {
	a.mu.Lock()
	a.globalStep = step
	a.mu.Unlock()
}

// numAccumulated returns the number of gradients added since the last take.
func (a *accumulator) numAccumulated() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.count
}

// applyDense adds grad, computed at localStep, to a dense accumulator.
func (a *accumulator) applyDense(localStep int64, grad *wire.Tensor) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if localStep < a.globalStep {
		return nil // stale: dropped, as TensorFlow does, unchecked
	}
	if a.count > 0 && !slices.Equal(a.sum.Shape, grad.Shape) {
		return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected %s, got %s", shapeString(a.sum.Shape), shapeString(grad.Shape))
	}
	if !compatibleShape(a.shape, grad.Shape) {
		return status.Errorf(wire.InvalidArgument, "Shape mismatch: expected %s, got %s", shapeString(a.shape), shapeString(grad.Shape))
	}
	if a.count == 0 {
		a.sum.Buf.Release()
		a.sum = tensor.Copy(grad)
	} else {
		a.arith.add(a.sum.Data, grad.Data)
	}
	a.count++
	a.flushLocked()
	return nil
}

// compatibleShape reports whether a full shape fits a partial one.
func compatibleShape(partial, full []int64) bool {
	if partial == nil {
		return true
	}
	if len(partial) != len(full) {
		return false
	}
	for i, d := range partial {
		if d >= 0 && d != full[i] {
			return false
		}
	}
	return true
}

// take waits until need gradients were added, or ctx ends.
func (a *accumulator) take(ctx context.Context, need int) (takeResult, error) {
	if need <= 0 {
		return takeResult{}, status.Errorf(wire.InvalidArgument, "Argument num_required must be positive, but was %d", need)
	}
	if ctx.Err() != nil {
		return takeResult{}, errTakeCancelled()
	}
	at := &takeAttempt{need: need, done: make(chan struct{})}
	a.mu.Lock()
	if a.dropped {
		a.mu.Unlock()
		return takeResult{}, errDropped(a.name)
	}
	a.takers = append(a.takers, at)
	a.flushLocked()
	a.mu.Unlock()
	select {
	case <-at.done:
		return at.out, at.err
	case <-ctx.Done():
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-at.done: // served before the step ended: the result is the step's
		return at.out, at.err
	default:
	}
	a.takers = slices.DeleteFunc(a.takers, func(t *takeAttempt) bool { return t == at })
	a.flushLocked()
	return takeResult{}, errTakeCancelled()
}

// flushLocked serves the takes at the head of the line that have their
// gradients.
func (a *accumulator) flushLocked() {
	for len(a.takers) > 0 && a.count >= a.takers[0].need {
		at := a.takers[0]
		a.takers = a.takers[1:]
		a.globalStep++
		at.out, at.err = a.resultLocked()
		a.count = 0
		close(at.done)
	}
}

// resultLocked hands the accumulated gradient over to a take, averaged
// when the reduction is MEAN.
func (a *accumulator) resultLocked() (takeResult, error) {
	sum := a.sum
	a.sum = wire.Tensor{}
	if !a.sparse {
		if a.mean {
			a.arith.divide(sum.Data, a.count)
		}
		return takeResult{values: sum}, nil
	}
	if a.mean {
		row := rowBytes(&sum)
		for i, n := range a.rowCount {
			a.arith.divide(sum.Data[i*row:(i+1)*row], n)
		}
	}
	idx, err := tensor.New(wire.DTInt64, []int64{int64(len(a.idx))})
	if err != nil {
		sum.Buf.Release()
		return takeResult{}, err
	}
	copy(tensor.View[int64](idx.Data), a.idx)
	shape, _ := tensor.New(wire.DTInt64, []int64{int64(len(sum.Shape))})
	dims := tensor.View[int64](shape.Data)
	copy(dims, sum.Shape)
	dims[0] = -1
	if len(a.shape) > 0 {
		dims[0] = a.shape[0]
	}
	return takeResult{indices: idx, values: sum, shape: shape}, nil
}

// rowBytes is the size of one row (a slice along dimension 0) of t.
func rowBytes(t *wire.Tensor) int {
	n := int64(1)
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return int(n) * t.DType.Size()
}

// drop fails the takes waiting on a dropped accumulator.
func (a *accumulator) drop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropped = true
	for _, at := range a.takers {
		at.err = errDropped(a.name)
		close(at.done)
	}
	a.takers = nil
	a.sum.Buf.Release()
	a.sum = wire.Tensor{}
}

func errDropped(name string) error {
	return status.Errorf(wire.Cancelled, "resource %s was deleted", name)
}
