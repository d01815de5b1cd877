package rpc

import "sync"

// maxIdleWorkers bounds the goroutines a Server keeps parked between calls.
const maxIdleWorkers = 256

// workers runs the handlers that may block on goroutines kept between
// calls: a goroutine started for each call allocated its closure and grew a
// fresh stack every time. A burst starts more; after it, up to
// maxIdleWorkers stay parked and the rest end.
type workers struct {
	mu     sync.Mutex
	idle   []*worker
	closed bool
}

type worker struct{ jobs chan job }

type job struct {
	call *serverCall
	m    *method
}

// run runs call on a parked worker, or on a new one.
func (w *workers) run(call *serverCall, m *method) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		wk := w.idle[n-1]
		w.idle[n-1] = nil
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		wk.jobs <- job{call, m}
		return
	}
	w.mu.Unlock()
	wk := &worker{jobs: make(chan job, 1)}
	go wk.loop(w, job{call, m})
}

func (wk *worker) loop(w *workers, j job) {
	for {
		j.call.run(j.m, true)
		if !w.park(wk) {
			return
		}
		var ok bool
		if j, ok = <-wk.jobs; !ok {
			return
		}
	}
}

// park offers wk for the next call; false means it is to end.
func (w *workers) park(wk *worker) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.idle) >= maxIdleWorkers {
		return false
	}
	w.idle = append(w.idle, wk)
	return true
}

// close ends the parked workers; busy ones end after their call.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	for i, wk := range w.idle {
		close(wk.jobs)
		w.idle[i] = nil
	}
	w.idle = nil
}
