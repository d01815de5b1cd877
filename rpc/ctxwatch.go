package rpc

// A caller whose context can end may read its own answer too: a watcher
// goroutine, one per connection and started by the first such caller,
// waits for the reading caller's context to end and then interrupts its
// read (see selfReader.interrupt), which readTurnUntil leaves at a frame
// boundary. The watcher is told of a context only when it differs from the
// last one it watched, so callers that share a context (the calls of one
// step, say) cost no wake-up and nothing is allocated per call, where
// context.AfterFunc would allocate on every call.

// watchLocked has the watcher watch done, the context of the caller that
// takes the read side.
func (cc *clientConn) watchLocked(done <-chan struct{}) {
	cc.readDone = done
	if cc.watched == done {
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
	if cc.interrupted {
		cc.interrupted = false
		cc.sr.resumeReads()
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
				cc.sr.interrupt()
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
