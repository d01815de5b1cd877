package afxdp

import (
	"fmt"
	"strings"
	"time"

	"github.com/starwire/starwire/internal/monoclock"
)

// Parked reports whether e's reactor sleeps in its link's Wait with the
// loop lock released, so that a sender transmits on its own goroutine.
// Its TryLock may meet a sender holding the lock for a moment, so false
// means "not now": poll it (testwait.Eventually), never check it once.
func (e *Endpoint) Parked() bool {
	if !e.sleeping.Load() || !e.loop.TryLock() {
		return false
	}
	e.loop.Unlock()
	return e.sleeping.Load()
}

// State describes e for a failure report: its Stats and every session's
// queues and protocol state (protocol.Session.State), taken under the
// loop lock, which a reactor that does not let go of it within a second
// is reported for instead.
func (e *Endpoint) State() string {
	got := make(chan string, 1)
	go func() {
		e.loop.Lock()
		defer e.loop.Unlock()
		e.env.Now = monoclock.Nanos()
		var b strings.Builder
		fmt.Fprintf(&b, "%+v", e.Stats())
		for _, s := range e.list {
			s.mu.Lock()
			fmt.Fprintf(&b, "\nsession %#x: %d queued, %d withdrawals, %d of %d frames for Receive\n%s",
				s.key.ID, len(s.inq), len(s.withdraws), len(s.conn.deliveries), cap(s.conn.deliveries), s.p.State())
			s.mu.Unlock()
		}
		got <- b.String()
	}()
	select {
	case st := <-got:
		return st
	case <-time.After(time.Second):
		return fmt.Sprintf("%+v\nthe reactor held its loop lock for 1s", e.Stats())
	}
}
