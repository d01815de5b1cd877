package ops

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A fifoQueue is TensorFlow's FIFOQueue, the resource of FIFOQueueV2:
// SyncReplicasOptimizer's token queue, from which every worker takes the
// global step it may compute its next gradient at, and into which the
// chief puts tokens once it applied the average.
//
// Elements are tuples of tensors of the queue's component dtypes (and
// shapes, when it has them). Enqueues and dequeues wait in two lines,
// each served in the order it came, as TensorFlow's QueueBase serves its
// attempts: an enqueue waits while the queue is full, a dequeue while it
// is empty (a dequeue of n until n elements came), and each may end when
// its step is cancelled. Closing the queue fails the enqueues that come
// after (Cancelled) and the dequeues it can no longer serve (OutOfRange);
// closing it with cancel_pending_enqueues also fails the enqueues
// waiting.
//
// All fields after mu are guarded by it.
type fifoQueue struct {
	name     string
	capacity int
	dtypes   []wire.DataType
	shapes   [][]int64 // one per component, or none: shapes unspecified

	mu     sync.Mutex
	closed bool
	elems  [][]wire.Tensor // the tuples, oldest first; the queue owns them
	enqs   []*queueAttempt // enqueues and closes, waiting in line
	deqs   []*queueAttempt
}

func (q *fifoQueue) resourceName() string { return q.name }

// An attemptKind is what a queueAttempt does.
type attemptKind uint8

const (
	enqueueOne attemptKind = iota
	enqueueMany
	closeQueue
	dequeueOne
	dequeueMany
)

// A queueAttempt is one enqueue, dequeue or close, in line until done is
// closed; then err, or out for a dequeue (owned by the caller), is its
// result.
type queueAttempt struct {
	kind  attemptKind
	tuple []wire.Tensor   // enqueue: the components (a batch for many)
	n     int             // elements still to move
	taken [][]wire.Tensor // dequeueMany: the tuples taken so far
	done  chan struct{}
	out   []wire.Tensor
	err   error
}

// An attemptResult says what serving an attempt achieved.
type attemptResult uint8

const (
	noProgress attemptResult = iota
	progressed
	complete
)

// newFIFOQueue returns an empty queue; a negative capacity means
// unbounded.
func newFIFOQueue(name string, capacity int, dtypes []wire.DataType, shapes [][]int64) *fifoQueue {
	if capacity < 0 {
		capacity = math.MaxInt32 // TensorFlow's kUnbounded
	}
	return &fifoQueue{name: name, capacity: capacity, dtypes: dtypes, shapes: shapes}
}

// size returns the number of elements in the queue.
func (q *fifoQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.elems)
}

// wait puts at in its line, serves the lines, and waits for at to be done
// or ctx to end; cancelled is the error of an attempt whose step ended.
func (q *fifoQueue) wait(ctx context.Context, at *queueAttempt, cancelled string) ([]wire.Tensor, error) {
	if ctx.Err() != nil {
		at.release()
		return nil, status.Errorf(wire.Cancelled, "%s", cancelled)
	}
	at.done = make(chan struct{})
	q.mu.Lock()
	line := &q.enqs
	if at.kind >= dequeueOne {
		line = &q.deqs
	}
	*line = append(*line, at)
	q.flushLocked()
	q.mu.Unlock()
	select {
	case <-at.done:
		return at.out, at.err
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	select {
	case <-at.done:
		return at.out, at.err
	default:
	}
	// TensorFlow drops what a cancelled dequeue of many had taken.
	*line = slices.DeleteFunc(*line, func(a *queueAttempt) bool { return a == at })
	at.release()
	q.flushLocked()
	return nil, status.Errorf(wire.Cancelled, "%s", cancelled)
}

// release drops the tensors an attempt holds.
func (at *queueAttempt) release() {
	tensor.ReleaseAll(at.tuple)
	for _, t := range at.taken {
		tensor.ReleaseAll(t)
	}
	at.tuple, at.taken = nil, nil
}

// flushLocked serves both lines until neither makes progress. Each round
// moves an element or ends an attempt, so it ends.
func (q *fifoQueue) flushLocked() {
	for {
		p := q.serveLocked(&q.enqs)
		if !(q.serveLocked(&q.deqs) || p) {
			return
		}
	}
}

// serveLocked serves line's attempts in order until one must wait, and
// reports whether any progressed.
func (q *fifoQueue) serveLocked(line *[]*queueAttempt) bool {
	progress := false
	for len(*line) > 0 {
		at := (*line)[0]
		switch q.runLocked(at) {
		case noProgress:
			return progress
		case progressed:
			return true
		case complete:
			*line = (*line)[1:]
			close(at.done)
			progress = true
		}
	}
	return progress
}

// runLocked serves one attempt as far as the queue allows.
func (q *fifoQueue) runLocked(at *queueAttempt) attemptResult {
	switch at.kind {
	case closeQueue:
		if q.closed {
			at.err = status.Errorf(wire.Cancelled, "Queue '%s' is already closed.", q.name)
		}
		q.closed = true
		return complete
	case enqueueOne, enqueueMany:
		return q.enqueueLocked(at)
	case dequeueOne:
		if len(q.elems) == 0 {
			if q.closed {
				at.err = q.errInsufficient(1)
				return complete
			}
			return noProgress
		}
		at.out = q.popLocked()
		return complete
	default:
		return q.dequeueManyLocked(at)
	}
}

func (q *fifoQueue) errInsufficient(requested int) error {
	return status.Errorf(wire.OutOfRange, "FIFOQueue '%s' is closed and has insufficient elements (requested %d, current size %d)", q.name, requested, len(q.elems))
}

func (q *fifoQueue) popLocked() []wire.Tensor {
	e := q.elems[0]
	q.elems[0] = nil
	q.elems = q.elems[1:]
	return e
}

func (q *fifoQueue) enqueueLocked(at *queueAttempt) attemptResult {
	if q.closed {
		at.err = status.Errorf(wire.Cancelled, "FIFOQueue '%s' is closed.", q.name)
		at.release()
		return complete
	}
	if at.kind == enqueueOne {
		if len(q.elems) >= q.capacity {
			return noProgress
		}
		q.elems = append(q.elems, at.tuple)
		at.tuple = nil
		return complete
	}
	result := noProgress
	batch := int(at.tuple[0].Shape[0])
	for len(q.elems) < q.capacity {
		result = progressed
		q.elems = append(q.elems, sliceTuple(at.tuple, batch-at.n))
		if at.n--; at.n == 0 {
			at.release()
			return complete
		}
	}
	return result
}

// dequeueManyLocked takes elements for a dequeue of many; when the queue
// closed before it had them all, it puts back what it took and fails.
func (q *fifoQueue) dequeueManyLocked(at *queueAttempt) attemptResult {
	if q.closed && len(q.elems) < at.n {
		at.err = q.errInsufficient(at.n)
		for i := len(at.taken) - 1; i >= 0; i-- {
			q.elems = slices.Insert(q.elems, 0, at.taken[i])
		}
		at.taken = nil
		return complete
	}
	result := noProgress
	for len(q.elems) > 0 {
		result = progressed
		at.taken = append(at.taken, q.popLocked())
		if at.n--; at.n == 0 {
			at.out, at.err = q.batchOf(at.taken)
			at.release()
			return complete
		}
	}
	return result
}

// batchOf stacks tuples into one tensor per component.
func (q *fifoQueue) batchOf(tuples [][]wire.Tensor) ([]wire.Tensor, error) {
	out := make([]wire.Tensor, len(q.dtypes))
	for c := range q.dtypes {
		shape := append([]int64{int64(len(tuples))}, q.shapes[c]...)
		t, err := tensor.New(q.dtypes[c], shape)
		if err != nil {
			tensor.ReleaseAll(out)
			return nil, err
		}
		row := len(t.Data) / max(len(tuples), 1)
		for i, tu := range tuples {
			copy(t.Data[i*row:(i+1)*row], tu[c].Data)
		}
		out[c] = t
	}
	return out, nil
}

// sliceTuple copies element i of a batch, one tensor per component.
func sliceTuple(batch []wire.Tensor, i int) []wire.Tensor {
	out := make([]wire.Tensor, len(batch))
	for c := range batch {
		b := &batch[c]
		row := rowBytes(b)
		out[c] = tensor.Copy(&wire.Tensor{DType: b.DType, Shape: b.Shape[1:], Data: b.Data[i*row : (i+1)*row]})
	}
	return out
}

// close closes the queue. With cancelPending it fails the enqueues
// waiting at once; without, the close waits in line behind them.
func (q *fifoQueue) close(ctx context.Context, cancelPending bool) error {
	if !cancelPending {
		_, err := q.wait(ctx, &queueAttempt{kind: closeQueue}, "Enqueue operation was cancelled")
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.failLocked(&q.enqs, status.Errorf(wire.Cancelled, "Enqueue operation was cancelled"))
	q.flushLocked()
	return nil
}

// failLocked ends every attempt of line with err.
func (q *fifoQueue) failLocked(line *[]*queueAttempt, err error) {
	for _, at := range *line {
		at.err = err
		at.release()
		close(at.done)
	}
	*line = nil
}

// drop closes a dropped queue, fails every attempt waiting and frees its
// elements.
func (q *fifoQueue) drop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.failLocked(&q.enqs, errDropped(q.name))
	q.failLocked(&q.deqs, errDropped(q.name))
	for _, e := range q.elems {
		tensor.ReleaseAll(e)
	}
	q.elems = nil
}
