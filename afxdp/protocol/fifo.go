package protocol

// fifo is a growable ring of T. Popped slots keep their contents, so a
// slot's owned buffers (a message's encoded head) are reused by the next
// element pushed there instead of being allocated again.
type fifo[T any] struct {
	buf        []T
	head, size int
}

// push returns the next free slot at the back, growing the ring when full.
func (q *fifo[T]) push() *T {
	if q.size == len(q.buf) {
		n := max(8, 2*len(q.buf))
		nb := make([]T, n)
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		// Old slots past size keep their buffers for reuse too.
		for i := q.size; i < len(q.buf); i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	p := &q.buf[(q.head+q.size)%len(q.buf)]
	q.size++
	return p
}

// at returns the i-th element from the front.
func (q *fifo[T]) at(i int) *T { return &q.buf[(q.head+i)%len(q.buf)] }

// pop drops the front element; its slot keeps its contents for reuse.
func (q *fifo[T]) pop() {
	q.head = (q.head + 1) % len(q.buf)
	q.size--
}

func (q *fifo[T]) len() int { return q.size }

// remove drops the i-th element from the front, moving those behind it
// forward. Its slot goes past the back, contents kept for reuse.
func (q *fifo[T]) remove(i int) {
	for ; i+1 < q.size; i++ {
		a, b := q.at(i), q.at(i+1)
		*a, *b = *b, *a
	}
	q.size--
}
