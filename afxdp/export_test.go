package afxdp

// Parked reports whether e's reactor sleeps in its link's Wait with the
// loop lock released, so that a sender transmits on its own goroutine.
func (e *Endpoint) Parked() bool {
	if !e.sleeping.Load() || !e.loop.TryLock() {
		return false
	}
	e.loop.Unlock()
	return e.sleeping.Load()
}
