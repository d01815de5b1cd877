package afxdp

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/starwire/starwire/wire"
)

// Receive memory. A frame's head says how large the frame is, and the
// receiver's Alloc gives its tensors their memory as soon as the head and
// descriptors are in, before the bytes (that is what lands them in place):
// so a head alone could make an endpoint allocate whatever it announces.
// Each session therefore reserves a frame's announced size when its first
// packet comes, and holds it until the frame is handed to Deliver (or
// dropped); frames completed and waiting for a Receive goroutine stay
// counted. Options.SessionMemory bounds what one session holds,
// Options.EndpointMemory what all of an endpoint's sessions hold, with the
// packets kept past gaps. A frame that does not fit now waits, its
// session's window shut (window.go), until deliveries make room; a frame
// announcing more than SessionMemory, as one beyond Options.Limits, is
// dropped as its bytes come and delivered bare with an error, failing its
// call alone.

// memory is an endpoint's account of received bytes held for receivers:
// frames, reserved at what their heads announce, and packets held past
// gaps. Frames may take all of the limit; held packets only what frames
// leave (a packet that finds no room is dropped, and resent), so a frame
// never waits on held packets, which may themselves wait on it: the two
// together stay within twice the limit.
type memory struct {
	used    atomic.Int64 // by frames
	held    atomic.Int64 // by packets held past gaps
	limit   int64
	waiting atomic.Int32 // sessions shut for lack of endpoint memory
	freed   atomic.Bool  // memory was released while some waited
}

// frameClaim parses the head of the frame that packet data starts and
// returns it with what it announces: the frame's bytes after the fixed
// header. A frame beyond the limits or SessionMemory gets tooLarge instead,
// and claims nothing: it is read to its end, dropped, and delivered bare
// with tooLarge as its error, so that only its call fails (a server
// answers ResourceExhausted), as on TCP. A head that is not one, or that
// announces other than the bytes of a frame ending in this packet, is the
// session's error.
func (s *session) frameClaim(h *PacketHeader, data []byte) (wh wire.Header, claim int64, tooLarge, err error) {
	if len(data) < wire.HeaderSize {
		return wh, 0, nil, fmt.Errorf("first packet of frame %d holds %d bytes, less than a frame header: %w", h.Msg, len(data), ErrProtocol)
	}
	wh, err = wire.ParseHeader(data[:wire.HeaderSize], &s.ep.opts.Limits)
	switch {
	case errors.Is(err, wire.ErrTooLarge):
		tooLarge, err = fmt.Errorf("afxdp: %w", err), nil
	case err != nil:
		return wh, 0, nil, fmt.Errorf("frame %d: %w: %w", h.Msg, err, ErrProtocol)
	}
	body := wh.BodyLen()
	if h.Flags&FlagLast != 0 && body != uint64(len(data)-wire.HeaderSize) {
		return wh, 0, nil, fmt.Errorf("frame %d announces %d bytes in a packet of %d: %w", h.Msg, wire.HeaderSize+body, len(data), ErrProtocol)
	}
	if tooLarge == nil && body > uint64(s.ep.opts.SessionMemory) {
		tooLarge = fmt.Errorf("afxdp: %v frame for call %d of %d bytes, more than a session holds (%d): %w",
			wh.Kind, wh.CallID, body, s.ep.opts.SessionMemory, wire.ErrTooLarge)
	}
	if tooLarge != nil {
		return wh, 0, tooLarge, nil
	}
	return wh, int64(body), nil, nil
}

// claimOf is what a frame reserved: its bytes after the fixed header (none
// for one delivered bare, too large).
func claimOf(in *wire.Inbound) int64 { return int64(in.Header.BodyLen()) }

// reserve takes n bytes for a frame from the session's and the endpoint's
// memory, or reports false when either has no room for it now. A session
// holding nothing always has room for a frame within SessionMemory.
func (s *session) reserve(n int64) bool {
	if used := s.mem.Load(); used > 0 && used+n > s.ep.opts.SessionMemory {
		return false
	}
	m := &s.ep.mem
	if !m.take(n) {
		if !s.memWait {
			s.memWait = true
			m.waiting.Add(1)
			s.ep.memWaiters = append(s.ep.memWaiters, s)
		}
		return false
	}
	s.mem.Add(n)
	return true
}

// release gives back n bytes of a frame handed on or dropped. Any
// goroutine may call it.
func (s *session) release(n int64) {
	s.mem.Add(-n)
	s.ep.mem.give(s.ep, n)
}

// takeHeld reserves n bytes for a held packet if they fit beside the
// frames.
func (m *memory) takeHeld(n int64) bool {
	if m.used.Load()+m.held.Load()+n > m.limit {
		return false
	}
	m.held.Add(n) // the reactor alone adds: a race only overshoots by a packet
	return true
}

// giveHeld returns a held packet's n bytes.
func (m *memory) giveHeld(n int64) { m.held.Add(-n) }

// take reserves n bytes for a frame if they fit.
func (m *memory) take(n int64) bool {
	for {
		used := m.used.Load()
		if used+n > m.limit && used > 0 {
			return false
		}
		if m.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// give returns n bytes and, if sessions wait for memory, has e's reactor
// try them again.
func (m *memory) give(e *Endpoint, n int64) {
	m.used.Add(-n)
	if m.waiting.Load() > 0 {
		m.freed.Store(true)
		if e.sleeping.Load() {
			e.link.Wake()
		}
	}
}

// retryMemory reopens, on the reactor, sessions that waited for endpoint
// memory, once some was released.
func (e *Endpoint) retryMemory() {
	if !e.mem.freed.Swap(false) {
		return
	}
	waiters := e.memWaiters
	e.memWaiters = e.memWaitersNext[:0]
	for i, s := range waiters {
		waiters[i] = nil
		s.memWait = false
		e.mem.waiting.Add(-1)
		if s.ended {
			continue
		}
		if err := s.reopen(); err != nil {
			s.control(TypeReset)
			e.endSession(s, err)
		}
	}
	e.memWaitersNext = waiters[:0]
}
