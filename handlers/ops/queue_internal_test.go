package ops

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
)

func i64Scalar(v int64) wire.Tensor {
	t, _ := tensor.New(wire.DTInt64, nil)
	tensor.View[int64](t.Data)[0] = v
	return t
}

func newTokenQueue(capacity int) *fifoQueue {
	return newFIFOQueue("q", capacity, []wire.DataType{wire.DTInt64}, [][]int64{{}})
}

type queueResult struct {
	out []wire.Tensor
	err error
}

// start runs at on q in a goroutine of its own.
func start(ctx context.Context, q *fifoQueue, at *queueAttempt, cancelled string) chan queueResult {
	ch := make(chan queueResult, 1)
	go func() {
		out, err := q.wait(ctx, at, cancelled)
		ch <- queueResult{out, err}
	}()
	return ch
}

func dequeue(ctx context.Context, q *fifoQueue) chan queueResult {
	return start(ctx, q, &queueAttempt{kind: dequeueOne}, "Dequeue operation was cancelled")
}

func enqueue(ctx context.Context, q *fifoQueue, v int64) chan queueResult {
	return start(ctx, q, &queueAttempt{kind: enqueueOne, tuple: []wire.Tensor{i64Scalar(v)}}, "Enqueue operation was cancelled")
}

func enqueueBatch(ctx context.Context, q *fifoQueue, vs ...int64) chan queueResult {
	return start(ctx, q, &queueAttempt{kind: enqueueMany, n: len(vs), tuple: []wire.Tensor{i64s(vs...)}}, "Enqueue operation was cancelled")
}

func dequeueN(ctx context.Context, q *fifoQueue, n int) chan queueResult {
	return start(ctx, q, &queueAttempt{kind: dequeueMany, n: n}, "Dequeue operation was cancelled")
}

// values returns a result's int64 elements and releases them.
func values(t *testing.T, r queueResult) []int64 {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	var vs []int64
	for _, o := range r.out {
		vs = append(vs, tensor.View[int64](o.Data)...)
	}
	tensor.ReleaseAll(r.out)
	return vs
}

func pending(ch chan queueResult) bool {
	select {
	case r := <-ch:
		ch <- r
		return false
	default:
		return true
	}
}

// TestQueueOrder: elements come out in the order they went in, dequeues
// are served in the order they came, a dequeue waits for an element.
func TestQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := newTokenQueue(-1)
		d1 := dequeue(ctx, q)
		synctest.Wait()
		d2 := dequeueN(ctx, q, 3)
		synctest.Wait()
		if !pending(d1) || !pending(d2) {
			t.Fatal("a dequeue of an empty queue returned")
		}
		values(t, <-enqueueBatch(ctx, q, 1, 2, 3))
		if got := values(t, <-d1); !slices.Equal(got, []int64{1}) {
			t.Fatalf("first dequeue = %v", got)
		}
		synctest.Wait()
		if !pending(d2) {
			t.Fatal("dequeue of 3 returned with 2 elements")
		}
		values(t, <-enqueue(ctx, q, 4))
		if got := values(t, <-d2); !slices.Equal(got, []int64{2, 3, 4}) {
			t.Fatalf("dequeue of 3 = %v", got)
		}
		if q.size() != 0 {
			t.Fatalf("size %d", q.size())
		}
		for v := range int64(3) {
			values(t, <-enqueue(ctx, q, v))
		}
		values(t, <-enqueueBatch(ctx, q, 3, 4))
		if got := values(t, <-dequeueN(ctx, q, 5)); !slices.Equal(got, []int64{0, 1, 2, 3, 4}) {
			t.Fatalf("dequeue of 5 = %v", got)
		}
	})
}

// TestQueueCapacity: an enqueue waits while the queue is full, and a
// batch goes in as room is made.
func TestQueueCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := newTokenQueue(2)
		e := enqueueBatch(ctx, q, 1, 2, 3, 4)
		synctest.Wait()
		if !pending(e) || q.size() != 2 {
			t.Fatalf("batch of 4 into a queue of 2: size %d", q.size())
		}
		if got := values(t, <-dequeueN(ctx, q, 3)); !slices.Equal(got, []int64{1, 2, 3}) {
			t.Fatalf("dequeue of 3 = %v", got)
		}
		values(t, <-e)
		if got := values(t, <-dequeue(ctx, q)); !slices.Equal(got, []int64{4}) {
			t.Fatalf("dequeue = %v", got)
		}
	})
}

// TestQueueClose: TensorFlow 2.21's answers after a close, its codes and
// words.
func TestQueueClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := newTokenQueue(-1)
		values(t, <-enqueueBatch(ctx, q, 1, 2))
		waiting := dequeueN(ctx, q, 3)
		synctest.Wait()
		if err := q.close(ctx, false); err != nil {
			t.Fatal(err)
		}
		r := <-waiting
		wantCode(t, r.err, wire.OutOfRange, "FIFOQueue 'q' is closed and has insufficient elements (requested 1, current size 0)")
		if q.size() != 2 {
			t.Fatalf("a failed dequeue of many kept %d of 2 elements", q.size())
		}
		r = <-dequeueN(ctx, q, 3)
		wantCode(t, r.err, wire.OutOfRange, "(requested 3, current size 2)")
		if got := values(t, <-dequeueN(ctx, q, 2)); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("dequeue of the closed queue's elements = %v", got)
		}
		wantCode(t, (<-dequeue(ctx, q)).err, wire.OutOfRange, "FIFOQueue 'q' is closed and has insufficient elements (requested 1, current size 0)")
		wantCode(t, (<-enqueue(ctx, q, 1)).err, wire.Cancelled, "FIFOQueue 'q' is closed.")
		wantCode(t, (<-enqueueBatch(ctx, q, 1)).err, wire.Cancelled, "FIFOQueue 'q' is closed.")
		wantCode(t, q.close(ctx, false), wire.Cancelled, "Queue 'q' is already closed.")
		if err := q.close(ctx, true); err != nil {
			t.Fatalf("close with cancel_pending_enqueues of a closed queue: %v", err)
		}
	})
}

// TestQueueCloseCancelsPendingEnqueues: with cancel_pending_enqueues the
// enqueues waiting for room fail at once; without, the close waits in
// line behind them.
func TestQueueCloseCancelsPendingEnqueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := newTokenQueue(1)
		values(t, <-enqueue(ctx, q, 1))
		blocked := enqueue(ctx, q, 2)
		synctest.Wait()
		closing := make(chan error, 1)
		go func() { closing <- q.close(ctx, false) }()
		synctest.Wait()
		select {
		case err := <-closing:
			t.Fatalf("close passed an enqueue waiting: %v", err)
		default:
		}
		if err := q.close(ctx, true); err != nil {
			t.Fatal(err)
		}
		wantCode(t, (<-blocked).err, wire.Cancelled, "Enqueue operation was cancelled")
		wantCode(t, <-closing, wire.Cancelled, "Enqueue operation was cancelled")
		if got := values(t, <-dequeue(ctx, q)); !slices.Equal(got, []int64{1}) {
			t.Fatalf("dequeue = %v", got)
		}
	})
}

// TestQueueStepCancelled: a dequeue whose step ends returns Cancelled and
// the next in line gets the element; so does a cancelled enqueue.
func TestQueueStepCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		q := newTokenQueue(1)
		step, cancel := context.WithCancel(ctx)
		first := dequeue(step, q)
		synctest.Wait()
		second := dequeue(ctx, q)
		synctest.Wait()
		cancel()
		wantCode(t, (<-first).err, wire.Cancelled, "Dequeue operation was cancelled")
		values(t, <-enqueue(ctx, q, 7))
		if got := values(t, <-second); !slices.Equal(got, []int64{7}) {
			t.Fatalf("second dequeue = %v", got)
		}
		values(t, <-enqueue(ctx, q, 8))
		step, cancel = context.WithCancel(ctx)
		full := enqueue(step, q, 9)
		synctest.Wait()
		cancel()
		wantCode(t, (<-full).err, wire.Cancelled, "Enqueue operation was cancelled")
		if got := values(t, <-dequeue(ctx, q)); !slices.Equal(got, []int64{8}) || q.size() != 0 {
			t.Fatalf("dequeue = %v, size %d", got, q.size())
		}
		late := dequeue(ctx, q)
		synctest.Wait()
		q.drop()
		if r := <-late; r.err == nil {
			t.Fatal("dequeue from a dropped queue succeeded")
		}
	})
}
