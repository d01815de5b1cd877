package rpc

import (
	"context"
	"sync"
	"time"

	"github.com/starwire/starwire/internal/monoclock"
)

// callCtx is the context a handler runs under. It is pooled with its call,
// so a handler must not use it after returning. It makes its Done channel
// and deadline timer only when a handler asks for Done, which quick handlers
// never do: a call that does not wait costs no allocation.
type callCtx struct {
	parent   context.Context
	deadline time.Time

	mu     sync.Mutex
	gen    uint64 // counts reuses, so a late timer cannot cancel the next call
	done   chan struct{}
	err    error
	timer  *time.Timer
	afters []afterFunc // functions to run when the context ends
	nextID uint64
	// spawned says that functions registered with AfterFunc were started
	// on goroutines of their own. They may still be reading the context
	// (a derived context's reads its Err and Value), so it must not be
	// reused: see finish.
	spawned bool
}

type afterFunc struct {
	id uint64
	f  func()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// reset makes c the context of a call that arrived at now (monoclock.Nanos;
// 0: unknown, read the clock) with timeout.
func (c *callCtx) reset(parent context.Context, now int64, timeout time.Duration) {
	c.parent = parent
	c.deadline = time.Time{}
	if timeout > 0 {
		if now == 0 {
			now = monoclock.Nanos()
		}
		c.deadline = monoclock.Time(now + int64(timeout))
	}
	c.mu.Lock()
	c.gen++
	c.done, c.err, c.timer = nil, nil, nil
	c.afters = c.afters[:0]
	c.spawned = false
	c.mu.Unlock()
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

func (c *callCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return c.done
	}
	c.expireLocked()
	if c.err != nil {
		c.done = closedChan
		return c.done
	}
	c.done = make(chan struct{})
	c.armLocked()
	return c.done
}

// armLocked starts the deadline timer, once someone waits for the context.
func (c *callCtx) armLocked() {
	if c.timer == nil && !c.deadline.IsZero() {
		gen := c.gen
		c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.cancelGen(gen, context.DeadlineExceeded) })
	}
}

// AfterFunc arranges for f to run on its own goroutine once the context
// ends. The context package looks for this method: without it, a context
// derived from this one (context.WithCancel, WithTimeout) would start a
// goroutine that watches Done and outlives the call.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	if c.err != nil {
		c.spawned = true
		go f()
		return func() bool { return false }
	}
	c.nextID++
	id, gen := c.nextID, c.gen
	c.afters = append(c.afters, afterFunc{id: id, f: f})
	c.armLocked()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen != gen {
			return false
		}
		for i, a := range c.afters {
			if a.id == id {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expireLocked()
	return c.err
}

func (c *callCtx) Value(key any) any {
	if c.parent == nil {
		return nil
	}
	return c.parent.Value(key)
}

func (c *callCtx) expireLocked() {
	if c.err == nil && !c.deadline.IsZero() && !time.Now().Before(c.deadline) {
		c.err = context.DeadlineExceeded
	}
}

// cancel ends the context with err, once.
func (c *callCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelLocked(err)
}

func (c *callCtx) cancelGen(gen uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		c.cancelLocked(err)
	}
}

func (c *callCtx) cancelLocked(err error) {
	if c.err == nil {
		c.err = err
	}
	for i, a := range c.afters {
		c.spawned = true
		go a.f()
		c.afters[i] = afterFunc{}
	}
	c.afters = c.afters[:0]
	if c.done != nil && c.done != closedChan {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
}

// finish ends the context when its call is over, as net/http does for a
// request's, so that contexts derived from it end too, and stops the timer
// before the context goes back to the pool. It reports whether the context
// may be reset for another call: no goroutine it started may still read
// it. A call whose handler derived a context that was still waiting when
// the caller cancelled or the call ended is not reused; quick handlers
// derive none, so the pool serves them as before.
func (c *callCtx) finish() (reusable bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil || len(c.afters) > 0 {
		c.cancelLocked(context.Canceled)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	return !c.spawned
}
