package ops

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

func f32s(shape []int64, vals ...float32) wire.Tensor {
	t, _ := tensor.New(wire.DTFloat, shape)
	copy(tensor.View[float32](t.Data), vals)
	return t
}

func i64s(vals ...int64) wire.Tensor {
	t, _ := tensor.New(wire.DTInt64, []int64{int64(len(vals))})
	copy(tensor.View[int64](t.Data), vals)
	return t
}

func newDense(shape []int64, mean bool) *accumulator {
	return &accumulator{name: "acc", dtype: wire.DTFloat, shape: shape, mean: mean, arith: accumArithFor[float32]()}
}

func wantCode(t *testing.T, err error, code wire.Code, msg string) {
	t.Helper()
	if err == nil || status.CodeOf(err) != code || !strings.Contains(err.Error(), msg) {
		t.Fatalf("err = %v, want %v containing %q", err, code, msg)
	}
}

// TestDenseAccumulator checks against what TensorFlow 2.21 answers for the
// same calls: the mean of every gradient added before the take, stale
// gradients dropped, the step advanced by each take.
func TestDenseAccumulator(t *testing.T) {
	a := newDense([]int64{2}, true)
	for _, g := range [][]float32{{1, 2}, {2, 5}, {3, 3}} {
		x := f32s([]int64{2}, g...)
		if err := a.applyDense(0, &x); err != nil {
			t.Fatal(err)
		}
	}
	r, err := a.take(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.View[float32](r.values.Data); !slices.Equal(got, []float32{2, float32(10) / 3}) {
		t.Fatalf("mean = %v", got)
	}
	r.values.Buf.Release()
	stale := f32s([]int64{2}, 9, 9)
	if err := a.applyDense(0, &stale); err != nil || a.numAccumulated() != 0 {
		t.Fatalf("stale gradient: %v, %d accumulated", err, a.numAccumulated())
	}
	wrong := f32s([]int64{3}, 1, 2, 3)
	if err := a.applyDense(0, &wrong); err != nil {
		t.Fatalf("a stale gradient is dropped unchecked: %v", err)
	}
	wantCode(t, a.applyDense(1, &wrong), wire.InvalidArgument, "Shape mismatch: expected [2], got [3]")
	a.setGlobalStep(5)
	if err := a.applyDense(4, &stale); err != nil || a.numAccumulated() != 0 {
		t.Fatalf("gradient of step 4 at step 5: %v, %d accumulated", err, a.numAccumulated())
	}
	a.setGlobalStep(3) // backwards, as TensorFlow allows
	if err := a.applyDense(4, &stale); err != nil || a.numAccumulated() != 1 {
		t.Fatalf("gradient of step 4 at step 3: %v, %d accumulated", err, a.numAccumulated())
	}
	_, err = a.take(context.Background(), 0)
	wantCode(t, err, wire.InvalidArgument, "Argument num_required must be positive, but was 0")
	a.drop()
}

func TestDenseAccumulatorSumAndShape(t *testing.T) {
	a := newDense(nil, false)
	x, y := f32s([]int64{2}, 1, 2), f32s([]int64{2}, 2, 5)
	if err := a.applyDense(0, &x); err != nil {
		t.Fatal(err)
	}
	z := f32s([]int64{3}, 1, 2, 3)
	wantCode(t, a.applyDense(0, &z), wire.InvalidArgument, "Shape mismatch: expected [2], got [3]")
	if err := a.applyDense(0, &y); err != nil {
		t.Fatal(err)
	}
	r, err := a.take(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer r.values.Buf.Release()
	if got := tensor.View[float32](r.values.Data); !slices.Equal(got, []float32{3, 7}) {
		t.Fatalf("sum = %v", got)
	}
	if tensor.View[float32](x.Data)[0] != 1 {
		t.Fatal("the accumulator wrote into its first gradient")
	}
}

// TestSparseAccumulatorMerge feeds unsorted indices, as an embedding's
// gradient has them; TensorFlow 2.21 takes indices [1 2 3 1 3 5 3] and
// these rows from the same two gradients.
func TestSparseAccumulatorMerge(t *testing.T) {
	a := &accumulator{name: "sacc", sparse: true, dtype: wire.DTFloat, shape: []int64{}, mean: true, arith: accumArithFor[float32]()}
	shape := i64s(10, 2)
	g1i, g1v := i64s(3, 1, 3), f32s([]int64{3, 2}, 1, 1, 2, 2, 3, 3)
	g2i, g2v := i64s(1, 2, 5, 3), f32s([]int64{4, 2}, 10, 10, 20, 20, 30, 30, 40, 40)
	if err := a.applySparse(0, sparseGrad{&g1i, &g1v, &shape}); err != nil {
		t.Fatal(err)
	}
	if err := a.applySparse(0, sparseGrad{&g2i, &g2v, &shape}); err != nil {
		t.Fatal(err)
	}
	r, err := a.take(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.View[int64](r.indices.Data); !slices.Equal(got, []int64{1, 2, 3, 1, 3, 5, 3}) {
		t.Fatalf("indices = %v", got)
	}
	if got := tensor.View[float32](r.values.Data); !slices.Equal(got, []float32{10, 10, 20, 20, 1, 1, 2, 2, 3, 3, 30, 30, 40, 40}) {
		t.Fatalf("values = %v", got)
	}
	if got := tensor.View[int64](r.shape.Data); !slices.Equal(got, []int64{-1, 2}) {
		t.Fatalf("shape = %v", got)
	}
	for _, x := range []wire.Tensor{r.indices, r.values, r.shape} {
		x.Buf.Release()
	}
}

// TestSparseAccumulatorMean: rows of equal index sum, and each row is
// divided by the number of gradients it holds.
func TestSparseAccumulatorMean(t *testing.T) {
	a := &accumulator{name: "sacc", sparse: true, dtype: wire.DTFloat, shape: []int64{10, 2}, mean: true, arith: accumArithFor[float32]()}
	shape := i64s(10, 2)
	g1i, g1v := i64s(1, 4), f32s([]int64{2, 2}, 1, 2, 3, 4)
	g2i, g2v := i64s(4, 6), f32s([]int64{2, 2}, 5, 6, 7, 8)
	for _, g := range []sparseGrad{{&g1i, &g1v, &shape}, {&g2i, &g2v, &shape}} {
		if err := a.applySparse(0, g); err != nil {
			t.Fatal(err)
		}
	}
	r, err := a.take(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := tensor.View[int64](r.indices.Data); !slices.Equal(got, []int64{1, 4, 6}) {
		t.Fatalf("indices = %v", got)
	}
	if got := tensor.View[float32](r.values.Data); !slices.Equal(got, []float32{1, 2, 4, 5, 7, 8}) {
		t.Fatalf("values = %v", got)
	}
	if got := tensor.View[int64](r.shape.Data); !slices.Equal(got, []int64{10, 2}) {
		t.Fatalf("shape = %v", got)
	}
	for _, x := range []wire.Tensor{r.indices, r.values, r.shape} {
		x.Buf.Release()
	}
}

// TestSparseAccumulatorErrors checks TensorFlow's checks, in its words.
func TestSparseAccumulatorErrors(t *testing.T) {
	a := &accumulator{name: "sacc", sparse: true, dtype: wire.DTFloat, shape: []int64{10, 2}, mean: true, arith: accumArithFor[float32]()}
	shape, shape3 := i64s(10, 2), i64s(10, 3)
	one, two := i64s(1), i64s(1, 2)
	big := i64s(11)
	row2, row3 := f32s([]int64{1, 2}, 1, 1), f32s([]int64{1, 3}, 1, 1, 1)
	scalar := f32s(nil, 1)
	cases := []struct {
		g   sparseGrad
		msg string
	}{
		{sparseGrad{&big, &row2, &shape}, "Shape mismatch: index of slice 0 exceeded limits of shape; index is 11 exceeded 10"},
		{sparseGrad{&one, &row3, &shape3}, "Shape mismatch: expected shape dim 1 to be 2, got 3"},
		{sparseGrad{&one, &row3, nil}, "Shape mismatch: expected values dim 1 to be 2, got 3"},
		{sparseGrad{&two, &row2, nil}, "Expected 2 non-empty input values, got 1"},
		{sparseGrad{&one, &scalar, nil}, "Values cannot be 0-dimensional."},
		{sparseGrad{&shape3, &row2, nil}, "Expected 2 non-empty input values, got 1"},
	}
	for _, c := range cases {
		wantCode(t, a.applySparse(0, c.g), wire.InvalidArgument, c.msg)
	}
	if a.numAccumulated() != 0 {
		t.Fatalf("%d refused gradients accumulated", a.numAccumulated())
	}
}

// TestTakeWaits: a take waits for its gradients, takes wait in line, and
// a take whose step ends returns Cancelled and leaves its place to the
// next. Nothing here is about time: synctest.Wait says when the takers
// are blocked.
func TestTakeWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newDense([]int64{1}, true)
		type res struct {
			v   float32
			err error
		}
		take := func(ctx context.Context, need int) chan res {
			ch := make(chan res, 1)
			go func() {
				r, err := a.take(ctx, need)
				var v float32
				if err == nil {
					v = tensor.View[float32](r.values.Data)[0]
					r.values.Buf.Release()
				}
				ch <- res{v, err}
			}()
			return ch
		}
		apply := func(step int64, v float32) {
			g := f32s([]int64{1}, v)
			defer g.Buf.Release()
			if err := a.applyDense(step, &g); err != nil {
				t.Fatal(err)
			}
		}
		ctx1, cancel1 := context.WithCancel(context.Background())
		first := take(ctx1, 2)
		synctest.Wait()
		second := take(context.Background(), 1)
		synctest.Wait()
		apply(0, 1)
		synctest.Wait()
		select {
		case r := <-first:
			t.Fatalf("take of 2 returned after 1 gradient: %v", r)
		case r := <-second:
			t.Fatalf("the second take went first: %v", r)
		default:
		}
		cancel1() // its step ends: the second take is served at once
		if r := <-first; r.err == nil {
			t.Fatal("cancelled take succeeded")
		} else {
			wantCode(t, r.err, wire.Cancelled, "TakeGrad operation was cancelled")
		}
		if r := <-second; r.err != nil || r.v != 1 {
			t.Fatalf("second take = %v", r)
		}
		third := take(context.Background(), 2)
		apply(0, 5) // stale: the take above moved the step to 1
		apply(1, 2)
		synctest.Wait()
		select {
		case r := <-third:
			t.Fatalf("take of 2 returned after a stale and a fresh gradient: %v", r)
		default:
		}
		apply(1, 4)
		if r := <-third; r.err != nil || r.v != 3 {
			t.Fatalf("third take = %v", r)
		}
		dropped := take(context.Background(), 1)
		synctest.Wait()
		a.drop()
		if r := <-dropped; r.err == nil {
			t.Fatal("take on a dropped accumulator succeeded")
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := a.take(cancelled, 1); err == nil {
			t.Fatal("take of a cancelled step succeeded")
		}
	})
}
