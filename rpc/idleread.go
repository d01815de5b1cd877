package rpc

import (
	"slices"
	"sync"
	"time"
)

// idleSweep is how often idleReads looks at the connections it watches,
// and how long a read side may be left unread before it goes back to the
// receiving goroutine.
const idleSweep = 50 * time.Millisecond

// idleReads hands the read side of client connections left unread for
// idleSweep back to their receiving goroutines, so that a peer that closes
// an idle connection is noticed soon, as when the read side is never lent.
// One goroutine and one ticker serve the whole process, and only while
// connections that lent their read side live.
var idleReads sweeper

type sweeper struct {
	mu      sync.Mutex
	conns   []*clientConn
	running bool
}

// add watches cc until its connection fails.
func (s *sweeper) add(cc *clientConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, cc)
	if !s.running {
		s.running = true
		go s.run()
	}
}

func (s *sweeper) run() {
	t := time.NewTicker(idleSweep)
	defer t.Stop()
	var conns []*clientConn
	for range t.C {
		s.mu.Lock()
		conns = append(conns[:0], s.conns...)
		s.mu.Unlock()
		dead := 0
		for _, cc := range conns {
			if !cc.sweep() {
				dead++
			}
		}
		s.mu.Lock()
		if dead > 0 {
			s.conns = slices.DeleteFunc(s.conns, func(cc *clientConn) bool {
				cc.mu.Lock()
				defer cc.mu.Unlock()
				return cc.err != nil
			})
		}
		if len(s.conns) == 0 {
			s.running = false
			s.mu.Unlock()
			clear(conns)
			return
		}
		s.mu.Unlock()
		clear(conns)
	}
}

// sweep hands the read side back to the receiving goroutine when it has
// been left unread for idleSweep; it reports whether the connection lives.
func (cc *clientConn) sweep() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.err != nil {
		return false
	}
	if cc.reading == nobodyReads && time.Since(cc.freedAt) >= idleSweep {
		cc.resumeLocked()
	}
	return true
}
