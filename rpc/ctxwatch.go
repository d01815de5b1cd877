package rpc

import "context"

// A caller whose context can end may read its own answer too: when the
// context ends, its read is interrupted (see readside.Reader.Interrupt), which
// readTurnUntil leaves at a frame boundary. Who interrupts depends on how
// the context is shared:
//
//   - A context that callers of the connection use again and again (the
//     calls of a step, or of a whole job) is watched by a goroutine of the
//     connection's, started by the first such caller and told of a context
//     only when a caller brings it a second time in a row: such calls cost
//     neither a wake-up nor an allocation.
//   - A context seen for the first time (one per call, say) gets a
//     context.AfterFunc for the call, which costs a few allocations but
//     wakes no goroutine, where telling the watcher would wake it on
//     every call.

// watchLocked arranges for the reads of the caller that takes the read
// side, whose context is ctx, to be interrupted once ctx ends.
func (cc *clientConn) watchLocked(ctx context.Context, done <-chan struct{}) {
	cc.readDone = done
	again := cc.lastDone == done
	cc.lastDone = done
	switch {
	case cc.watched == done:
		return
	case !again:
		if cc.interruptFn == nil {
			cc.interruptFn = cc.interruptIfEnded
		}
		cc.afterStop = context.AfterFunc(ctx, cc.interruptFn)
		return
	}
	cc.watched = done
	if !cc.watcher {
		cc.watcher = true
		cc.rewatch = make(chan struct{}, 1)
		go cc.watch()
		return
	}
	select {
	case cc.rewatch <- struct{}{}:
	default:
	}
}

// unwatchLocked ends a caller's reads under watch, clearing the interrupt
// before anybody else reads.
func (cc *clientConn) unwatchLocked() {
	cc.readDone = nil
	if cc.afterStop != nil {
		cc.afterStop()
		cc.afterStop = nil
	}
	if cc.interrupted {
		cc.interrupted = false
		cc.sr.ResumeReads()
	}
}

// watch interrupts the reads of a caller whose context ends while it holds
// the read side, until the connection fails.
func (cc *clientConn) watch() {
	for {
		cc.mu.Lock()
		done := cc.watched
		cc.mu.Unlock()
		select {
		case <-cc.rewatch:
		case <-done:
			cc.mu.Lock()
			if cc.readDone == done && !cc.interrupted {
				cc.interrupted = true
				cc.sr.Interrupt()
			}
			if cc.watched == done {
				// An ended context is not watched again unless a
				// caller brings it back.
				cc.watched = nil
			}
			cc.mu.Unlock()
		case <-cc.gone:
			return
		}
	}
}

// interruptIfEnded interrupts the reads of the caller holding the read
// side if its context has ended; a context.AfterFunc calls it, possibly
// late, once another caller reads.
func (cc *clientConn) interruptIfEnded() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.readDone == nil || cc.interrupted {
		return
	}
	select {
	case <-cc.readDone:
		cc.interrupted = true
		cc.sr.Interrupt()
	default:
	}
}
