package afxdp

import (
	"errors"
	"fmt"
	"sync"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// session is the endpoint's side of one protocol session: the queue other
// goroutines hand work to (Send, Withdraw, Close, Receive's reopen
// requests), and the session table's bookkeeping. The protocol state, p,
// belongs to the endpoint's loop lock (see Endpoint).
type session struct {
	ep   *Endpoint
	key  protocol.Key
	conn *Conn
	p    *protocol.Session

	mu        sync.Mutex
	inq       []*wire.Message // Sent, not yet taken by the reactor
	spare     []*wire.Message // the reactor's previous inq, swapped back in
	withdraws []*withdrawal   // Withdraw calls for the reactor to answer
	closeReq  bool
	queued    bool  // on ep.ready
	dead      error // set once the session ended

	openDone chan error // a Dial waiting for the handshake

	// The session table (sessions.go): whether a peer opened it (and it
	// counts against the bounds).
	accepted   bool
	registered bool
	ended      bool
}

// take hands the messages of the Send queue to the protocol, and answers
// the Withdraw calls queued. It reports whether the session is to close.
func (s *session) take() (closing bool) {
	s.mu.Lock()
	q := s.inq
	s.inq = s.spare[:0]
	ws := s.withdraws
	s.withdraws = nil
	closing = s.closeReq
	s.queued = false
	s.mu.Unlock()
	for i, m := range q {
		q[i] = nil
		s.p.Send(m)
	}
	s.spare = q[:0]
	for _, w := range ws {
		w.got <- s.p.Withdraw(w.m)
	}
	return closing
}

// wantReopen asks the reactor to try the kept packets again; called by
// the goroutine that made room, or by the protocol (Upper.Recheck).
func (s *session) wantReopen() {
	s.mu.Lock()
	wasQueued := s.queued || s.dead != nil
	s.queued = true
	s.mu.Unlock()
	if !wasQueued {
		s.ep.enqueue(s)
	}
}

// end finishes the session with err: every message it holds completes with
// err, and its Conn's Receive returns.
func (s *session) end(err error) {
	if s.ended {
		return
	}
	if !errors.Is(err, wire.ErrClosed) {
		// A link's failure, say: the session is closed all the same.
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	s.ended = true
	s.mu.Lock()
	s.dead = err
	q := s.inq
	s.inq = nil
	ws := s.withdraws
	s.withdraws = nil
	s.mu.Unlock()
	wasOpening := s.p.End(err)
	for _, m := range q {
		m.Complete(err)
	}
	for _, w := range ws {
		w.got <- wire.Completing // every message was completed above
	}
	if r := s.conn.receiver(); r != nil && !s.ep.opts.BlockingReceiver {
		s.conn.drainBacklog(r, s.ep.env.Now)
	}
	if wasOpening {
		s.openDone <- err
	}
	s.conn.finish(err)
}

// closed is the error a session this end closes ends with.
func (s *session) closed() error {
	return fmt.Errorf("afxdp: session %#x with %v: %w", s.key.ID, s.key.Peer, ErrClosed)
}
