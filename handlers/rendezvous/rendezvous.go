package rendezvous

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A Rendezvous pairs each step's sent tensors with their receivers by
// rendezvous key. Send never blocks; Recv waits for the tensor until its
// context ends. Each key is sent once and received once per step. A tensor
// in the rendezvous holds one reference of its Buf, which moves from the
// sender to the rendezvous and on to the receiver.
//
// Aborting a step fails its waiting and future receivers with the step's
// error until Cleanup forgets the step; Cleanup drops everything the step
// held, and for a few seconds afterwards late Sends and Recvs of the step
// fail rather than recreate state for it (Open lifts that for a new run of
// the same step id). Steps are spread over shards, each with its own mutex, so that
// concurrent steps rarely contend. Safe for concurrent use.
type Rendezvous struct {
	shards [rendezvousShards]rendezvousShard
}

const rendezvousShards = 16

type rendezvousShard struct {
	mu    sync.Mutex
	steps map[int64]*stepTable
	// cleaned remembers the shard's most recently cleaned steps for a
	// while, so that a late Send or RecvTensor for one fails instead of
	// recreating its state, which nobody would clean up again.
	cleaned [cleanedSteps]cleanedStep
	next    int
}

const (
	cleanedSteps = 64
	// cleanedTTL bounds how long a cleaned step refuses late arrivals. A
	// step id reused later (a restarted master counting from 1 again) is
	// a new step; Open also clears it at once.
	cleanedTTL = 5 * time.Second
)

type cleanedStep struct {
	step int64
	err  error
	at   time.Time
}

// stepTable holds one step's keys; guarded by its shard's mutex.
type stepTable struct {
	slots map[string]*slot
	err   error // set when the step was aborted
}

// A slot holds a sent tensor waiting for its receiver, or a receiver waiting
// for its tensor (ready is then non-nil).
type slot struct {
	t         wire.Tensor
	sendStart int64 // micros since the epoch
	full      bool
	ready     chan struct{} // closed when the tensor arrives or the step aborts
	err       error
	// w is an asynchronous receiver (RecvAsync), told instead of ready;
	// step and key locate its slot for Withdraw.
	w    Waiter
	step int64
	key  string
}

var slots = sync.Pool{New: func() any { return new(slot) }}

// take returns a full slot's tensor and send time, whose Buf reference
// passes to the caller, and recycles the slot, which nobody else holds
// once it left its table.
func (s *slot) take() (wire.Tensor, int64) {
	t, start := s.t, s.sendStart
	*s = slot{}
	slots.Put(s)
	return t, start
}

// New returns an empty rendezvous.
func New() *Rendezvous {
	r := &Rendezvous{}
	for i := range r.shards {
		r.shards[i].steps = make(map[int64]*stepTable)
	}
	return r
}

func (r *Rendezvous) shard(step int64) *rendezvousShard {
	return &r.shards[uint64(step)%rendezvousShards]
}

// table returns step's table, creating it; the shard's mutex is held. A
// recently cleaned step gets a throwaway table carrying its error.
func (sh *rendezvousShard) table(step int64) *stepTable {
	st := sh.steps[step]
	if st == nil {
		for i := range sh.cleaned {
			if c := &sh.cleaned[i]; c.err != nil && c.step == step && time.Since(c.at) < cleanedTTL {
				return &stepTable{err: c.err}
			}
		}
		st = &stepTable{slots: make(map[string]*slot)}
		sh.steps[step] = st
	}
	return st
}

// forget drops step's table if it holds nothing; the shard's mutex is held.
func (sh *rendezvousShard) forget(step int64) {
	if st := sh.steps[step]; st != nil && st.err == nil && len(st.slots) == 0 {
		delete(sh.steps, step)
	}
}

// Send hands t to the receiver of key in step. The rendezvous takes over the
// caller's reference t.Buf (it is released if the tensor is never received).
// Send fails when the step was aborted or key was already sent.
func (r *Rendezvous) Send(step int64, key string, t wire.Tensor) error {
	sh := r.shard(step)
	sh.mu.Lock()
	st := sh.table(step)
	if st.err != nil {
		sh.mu.Unlock()
		t.Buf.Release()
		return st.err
	}
	s := st.slots[key]
	switch {
	case s == nil:
		s = slots.Get().(*slot)
		s.t, s.sendStart, s.full = t, time.Now().UnixMicro(), true
		st.slots[key] = s
	case s.full:
		sh.mu.Unlock()
		t.Buf.Release()
		return status.Errorf(wire.AlreadyExists, "rendezvous: step %d: %q sent twice", step, key)
	default: // a receiver is waiting; it owns s from here on
		s.t, s.sendStart, s.full = t, time.Now().UnixMicro(), true
		delete(st.slots, key)
		if s.w != nil {
			sh.mu.Unlock()
			s.w.Received(s.t, s.sendStart, nil)
			return nil
		}
		close(s.ready)
	}
	sh.mu.Unlock()
	return nil
}

// TryRecv is Recv that does not wait: ok is false, and err nil, when the
// tensor has not been sent yet.
func (r *Rendezvous) TryRecv(step int64, key string) (t wire.Tensor, sendStart int64, ok bool, err error) {
	sh := r.shard(step)
	sh.mu.Lock()
	st := sh.table(step)
	if st.err != nil {
		sh.mu.Unlock()
		return wire.Tensor{}, 0, false, st.err
	}
	s := st.slots[key]
	if s == nil {
		sh.mu.Unlock()
		return wire.Tensor{}, 0, false, nil
	}
	if !s.full {
		sh.mu.Unlock()
		return wire.Tensor{}, 0, false, status.Errorf(wire.AlreadyExists, "rendezvous: step %d: %q received twice", step, key)
	}
	delete(st.slots, key)
	sh.mu.Unlock()
	t, sendStart = s.take()
	return t, sendStart, true, nil
}

// A Waiter receives what RecvAsync waits for.
type Waiter interface {
	// Received gets the tensor, owning its Buf reference, and the time it
	// was sent (micros since the epoch), or the error that ended the wait.
	Received(t wire.Tensor, sendStart int64, err error)
}

// A Ticket stands for a receiver RecvAsync left waiting: it is that
// receiver's slot, so that leaving one allocates nothing more.
type Ticket slot

// RecvAsync is Recv for a receiver that does not wait: w.Received gets
// key's tensor in step, or the step's error, exactly once. When the tensor
// is there, or the receive fails at once, that is before RecvAsync returns,
// on the calling goroutine, and the ticket is nil; otherwise it is on the
// goroutine of the Send, Abort or Cleanup that settles the wait, after the
// rendezvous' lock is released, unless Withdraw takes the ticket back
// first. Like Recv, it keeps a copy of key only while it waits.
func (r *Rendezvous) RecvAsync(step int64, key string, w Waiter) *Ticket {
	sh := r.shard(step)
	sh.mu.Lock()
	st := sh.table(step)
	if st.err != nil {
		sh.mu.Unlock()
		w.Received(wire.Tensor{}, 0, st.err)
		return nil
	}
	s := st.slots[key]
	if s != nil && s.full {
		delete(st.slots, key)
		sh.mu.Unlock()
		t, start := s.take()
		w.Received(t, start, nil)
		return nil
	}
	if s != nil {
		sh.mu.Unlock()
		w.Received(wire.Tensor{}, 0, status.Errorf(wire.AlreadyExists, "rendezvous: step %d: %q received twice", step, key))
		return nil
	}
	key = strings.Clone(key)
	s = &slot{w: w, step: step, key: key}
	st.slots[key] = s
	sh.mu.Unlock()
	return (*Ticket)(s)
}

// Withdraw takes back a waiting receiver's ticket, so that its Waiter is
// never called, and reports whether it did: false means the Waiter has
// been or is being called.
func (r *Rendezvous) Withdraw(tk *Ticket) bool {
	s := (*slot)(tk)
	sh := r.shard(s.step)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if s.full || s.err != nil {
		return false
	}
	cur := sh.steps[s.step]
	if cur == nil || cur.slots[s.key] != s {
		return false
	}
	delete(cur.slots, s.key)
	sh.forget(s.step)
	return true
}

// Recv waits for key's tensor in step until ctx ends, and returns it with
// the time it was sent (micros since the epoch). The caller owns the
// returned tensor's Buf reference. Recv keeps key only while it waits, and
// then a copy of it, so key may be a view of memory the caller reuses.
func (r *Rendezvous) Recv(ctx context.Context, step int64, key string) (wire.Tensor, int64, error) {
	sh := r.shard(step)
	sh.mu.Lock()
	st := sh.table(step)
	if st.err != nil {
		sh.mu.Unlock()
		return wire.Tensor{}, 0, st.err
	}
	s := st.slots[key]
	if s != nil && s.full {
		delete(st.slots, key)
		sh.mu.Unlock()
		t, start := s.take()
		return t, start, nil
	}
	if s != nil {
		sh.mu.Unlock()
		return wire.Tensor{}, 0, status.Errorf(wire.AlreadyExists, "rendezvous: step %d: %q received twice", step, key)
	}
	// Waiting slots are not pooled: a late Send or abort may still touch one.
	// The key is copied, since callers may pass a view of a request frame.
	key = strings.Clone(key)
	s = &slot{ready: make(chan struct{})}
	st.slots[key] = s
	sh.mu.Unlock()

	select {
	case <-s.ready:
	case <-ctx.Done():
		sh.mu.Lock()
		if s.full || s.err != nil {
			sh.mu.Unlock()
			break // the tensor (or the abort) won the race
		}
		if cur := sh.steps[step]; cur != nil && cur.slots[key] == s {
			delete(cur.slots, key)
			sh.forget(step)
		}
		sh.mu.Unlock()
		return wire.Tensor{}, 0, status.Errorf(status.CodeOf(ctx.Err()), "rendezvous: step %d: waiting for %q: %v", step, key, ctx.Err())
	}
	if s.err != nil {
		return wire.Tensor{}, 0, s.err
	}
	return s.t, s.sendStart, nil
}

// Abort fails step's waiting and future receivers and senders with err,
// releasing the tensors it held, until Cleanup.
func (r *Rendezvous) Abort(step int64, err error) {
	sh := r.shard(step)
	sh.mu.Lock()
	st := sh.table(step)
	if st.err == nil {
		st.err = err
	}
	told := st.drain(st.err, nil)
	sh.mu.Unlock()
	tell(told)
}

// Open starts a new run of step: a step id cleaned up recently, which
// late arrivals could not use, becomes usable again.
func (r *Rendezvous) Open(step int64) {
	sh := r.shard(step)
	sh.mu.Lock()
	for i := range sh.cleaned {
		if c := &sh.cleaned[i]; c.step == step {
			*c = cleanedStep{}
		}
	}
	sh.mu.Unlock()
}

// Cleanup aborts step with err, if it is still open, and forgets it.
func (r *Rendezvous) Cleanup(step int64, err error) {
	sh := r.shard(step)
	sh.mu.Lock()
	var told []*slot
	if st := sh.steps[step]; st != nil {
		if st.err != nil {
			err = st.err
		}
		told = st.drain(err, nil)
		delete(sh.steps, step)
	}
	sh.cleaned[sh.next] = cleanedStep{step: step, err: err, at: time.Now()}
	sh.next = (sh.next + 1) % cleanedSteps
	sh.mu.Unlock()
	tell(told)
}

// CleanupAll forgets every step, failing their receivers with err.
func (r *Rendezvous) CleanupAll(err error) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		var told []*slot
		for step, st := range sh.steps {
			told = st.drain(err, told)
			delete(sh.steps, step)
		}
		sh.mu.Unlock()
		tell(told)
	}
}

// drain fails the waiters and releases the sent tensors; the shard's mutex
// is held. It appends to told the asynchronous receivers, to be told (see
// tell) once the mutex is released.
func (st *stepTable) drain(err error, told []*slot) []*slot {
	for key, s := range st.slots {
		delete(st.slots, key)
		if s.full {
			s.t.Buf.Release()
			*s = slot{}
			slots.Put(s)
			continue
		}
		s.err = err
		if s.w != nil {
			told = append(told, s)
			continue
		}
		close(s.ready)
	}
	return told
}

// tell gives drained asynchronous receivers their error.
func tell(told []*slot) {
	for _, s := range told {
		s.w.Received(wire.Tensor{}, 0, s.err)
	}
}

// Len returns the number of steps the rendezvous holds state for and the
// number of keys among them, so tests can check that cleanup leaves nothing.
func (r *Rendezvous) Len() (steps, keys int) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		steps += len(sh.steps)
		for _, st := range sh.steps {
			keys += len(st.slots)
		}
		sh.mu.Unlock()
	}
	return steps, keys
}
