package afxdp

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
)

// The session table's bounds. Peers open sessions with OPEN, which costs
// them one datagram and no state, so an endpoint must not let OPENs cost it
// much either:
//
//   - An OPEN makes a half-open entry of a few dozen bytes, answered (and
//     answered again, backing off, in case the answer is lost) until the
//     dialer's next packet completes the handshake. Only then is there a
//     session, with its buffers and its Conn, and only then is it handed
//     to Accept, whose caller typically gives it a goroutine (rpc.Server
//     does, to run its Receive loop). A dialer that never completes it
//     leaves nothing behind after Options.HandshakeTimeout.
//   - Sessions peers opened, half-open ones included, are bounded per
//     source IP address and in all (Options.MaxPeerSessions,
//     MaxSessions; a Group's endpoints share the bounds). OPENs beyond
//     them are dropped, unanswered, and counted (Stats.Refused): the
//     dialer's repeats find room once some closes.
//   - A session whose peer has fallen silent is probed, and closed when it
//     stays silent (Options.IdleTimeout): a session lives as long as its
//     peer answers, with calls in flight or none.

// sessionCaps counts the sessions peers opened, against the bounds of
// Options. A Group's endpoints share one.
type sessionCaps struct {
	mu            sync.Mutex
	total, maxAll int
	perPeer       map[netip.Addr]int
	maxPeer       int
}

func newSessionCaps(o *Options) *sessionCaps {
	return &sessionCaps{maxAll: o.MaxSessions, maxPeer: o.MaxPeerSessions, perPeer: make(map[netip.Addr]int)}
}

// admit counts a session from addr, or reports false when a bound is
// reached.
func (c *sessionCaps) admit(addr netip.Addr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= c.maxAll || c.perPeer[addr] >= c.maxPeer {
		return false
	}
	c.total++
	c.perPeer[addr]++
	return true
}

// release uncounts a session from addr.
func (c *sessionCaps) release(addr netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total--
	if n := c.perPeer[addr] - 1; n > 0 {
		c.perPeer[addr] = n
	} else {
		delete(c.perPeer, addr)
	}
}

// halfOpen is a session a peer asked for with OPEN that is waiting for the
// dialer's next packet.
type halfOpen struct {
	key      protocol.Key
	auth     opening // its ticket and tokens
	peerMax  uint64  // the dialer's datagram size, from its OPEN
	expireAt int64   // when it is dropped, handshake or not (monoclock.Nanos)
	answerAt int64   // when the answer to OPEN goes again
	wait     time.Duration
	gone     bool // promoted or dropped; the list forgets it at its next scan
}

// open takes a peer's OPEN for a session this endpoint does not have. An
// endpoint that accepts no sessions answers RESET at once. Otherwise the
// OPEN must be authentic (auth.go), or it is dropped before anything is
// kept for it; then it goes to its owner in a Group, and makes a half-open
// session.
func (e *Endpoint) open(key protocol.Key, h *protocol.PacketHeader, data []byte, d *link.Datagram) {
	if e.opts.Backlog < 0 {
		e.reset(key, h.Token)
		return
	}
	auth, err := e.keys.check(h, data, time.Now()) // the wall clock, as the dialer's
	if err != nil {
		if errors.Is(err, protocol.ErrReplayed) {
			e.ctr.replayed.Add(1)
		} else {
			e.ctr.unauthentic.Add(1)
		}
		return
	}
	if e.group != nil {
		if o, mine := e.group.claim(key, e); !mine && o != e {
			o.forward(d.Data, d.From) // another reactor took it a moment ago
			return
		}
	}
	e.openHalf(key, h, auth)
}

// openHalf answers an authentic OPEN: with RESET when the backlog is
// full, not at all when a bound is reached, with its datagram size
// otherwise.
func (e *Endpoint) openHalf(key protocol.Key, h *protocol.PacketHeader, auth opening) {
	if len(e.accepts) == cap(e.accepts) {
		e.forgetOwner(key)
		e.reset(key, h.Token)
		return
	}
	if !e.caps.admit(key.Peer.Addr()) {
		e.forgetOwner(key)
		e.ctr.refused.Add(1)
		return
	}
	if !e.keys.take(key.ID, auth, time.Now()) {
		e.caps.release(key.Peer.Addr())
		e.forgetOwner(key)
		e.ctr.replayed.Add(1)
		return
	}
	ho := &halfOpen{key: key, auth: auth, peerMax: h.Offset, expireAt: e.env.Now + int64(e.opts.HandshakeTimeout),
		wait: max(e.opts.RTO, 10*time.Millisecond)}
	e.half[key] = ho
	e.halfList = append(e.halfList, ho)
	e.ctr.halfOpen.Store(uint64(len(e.half)))
	e.answerOpen(ho)
}

// answerOpen sends the answer to a half-open session's OPEN, an ACK with
// this end's datagram size, and schedules its repeat.
func (e *Endpoint) answerOpen(ho *halfOpen) {
	if buf := e.link.TxBuffer(); buf != nil {
		protocol.PutHeader(buf, &protocol.PacketHeader{Type: protocol.TypeAck, Session: ho.key.ID, Flags: protocol.FlagSize,
			Window: uint32(e.opts.Window), Offset: uint64(e.link.MaxPayload()), Token: ho.auth.listener})
		e.queue(protocol.HeaderLen, ho.key.Peer)
	}
	ho.answerAt = e.env.Now + int64(ho.wait)
	ho.wait = min(2*ho.wait, e.opts.MaxRTO)
	e.halfNext = earliest(e.halfNext, ho.answerAt)
}

// promote makes a half-open session a session, now that its dialer sent
// its first packet after OPEN, and hands it to Accept. It returns nil when
// the backlog filled meanwhile; the dialer is told with RESET. The session
// is in the tables, and counted in Stats, before Accept can return it.
func (e *Endpoint) promote(ho *halfOpen) *session {
	e.dropHalf(ho)
	s := e.newSession(ho.key)
	s.p.Authenticate(ho.auth.listener, ho.auth.dialer, nil)
	s.p.Agree(ho.peerMax)
	s.accepted = true
	e.register(s)
	// A Group's reactors share accepts: another one may have filled it,
	// and the reactor must not block on it.
	select {
	case e.accepts <- s.conn:
		return s
	default:
		e.endSession(s, ErrReset)
		e.reset(ho.key, ho.auth.dialer)
		return nil
	}
}

// authentic reports whether h, to a half-open session, comes from its
// dialer (as protocol.Session.Authentic).
func (ho *halfOpen) authentic(h *protocol.PacketHeader) bool {
	return h.Token == ho.auth.dialer || (h.Type == protocol.TypeReset && h.Token == ho.auth.listener)
}

// dropHalf forgets a half-open session; its count stays with the caller.
func (e *Endpoint) dropHalf(ho *halfOpen) {
	ho.gone = true
	delete(e.half, ho.key)
	e.ctr.halfOpen.Store(uint64(len(e.half)))
}

// closeHalf drops a half-open session whose dialer gave up (CLOSE, RESET)
// or never completed the handshake.
func (e *Endpoint) closeHalf(ho *halfOpen) {
	e.dropHalf(ho)
	e.caps.release(ho.key.Peer.Addr())
	e.forgetOwner(ho.key)
}

// halfTimers repeats the answers of half-open sessions that are due and
// drops those past Options.HandshakeTimeout. It returns when it next has
// work (0 for never). Between those times it costs one comparison.
func (e *Endpoint) halfTimers() int64 {
	if e.halfNext == 0 || e.env.Now < e.halfNext {
		return e.halfNext
	}
	e.halfNext = 0
	kept := e.halfList[:0]
	for _, ho := range e.halfList {
		switch {
		case ho.gone:
			continue
		case e.env.Now >= ho.expireAt:
			e.closeHalf(ho)
			e.ctr.expired.Add(1)
			continue
		case e.env.Now >= ho.answerAt:
			e.answerOpen(ho)
		}
		kept = append(kept, ho)
		e.halfNext = earliest(earliest(e.halfNext, ho.answerAt), ho.expireAt)
	}
	clear(e.halfList[len(kept):])
	e.halfList = kept
	return e.halfNext
}

// register enters s in the session table.
func (e *Endpoint) register(s *session) {
	s.registered = true
	e.sessions[s.key] = s
	e.last = nil // it may have held the key's session before s
	e.list = append(e.list, s)
	e.ctr.sessions.Store(uint64(len(e.list)))
	s.p.Start()
}

// forgetOwner drops a Group's record that e owns key.
func (e *Endpoint) forgetOwner(key protocol.Key) {
	if e.group != nil {
		e.group.forget(key, e)
	}
}
