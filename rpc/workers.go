package rpc

import "github.com/starwire/starwire/internal/parked"

// maxIdleWorkers bounds the goroutines a Server keeps parked between calls.
const maxIdleWorkers = 256

// A job is a call whose handler may block, run on a Server's workers: a
// goroutine kept between calls (package parked), as one started for each
// call allocated its closure and grew a fresh stack every time.
type job struct {
	call *serverCall
	m    *method
}

func newWorkers() parked.Pool[job] {
	return parked.Pool[job]{Run: func(j job) { j.call.worker = true; j.call.run(j.m, true) }, Max: maxIdleWorkers}
}
