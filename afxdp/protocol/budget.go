package protocol

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
// counted. Config.SessionMemory bounds what one session holds,
// Config.EndpointMemory what all of an endpoint's sessions hold, with the
// packets kept past gaps. A frame that does not fit now waits, its
// session's window shut (window.go), until deliveries make room; a frame
// announcing more than SessionMemory, as one beyond Config.Limits, is
// dropped as its bytes come and delivered bare with an error, failing its
// call alone.

// Memory is an Env's account of received bytes held for receivers:
// frames, reserved at what their heads announce, and packets held past
// gaps. Frames may take all of the limit; held packets only what frames
// leave (a packet that finds no room is dropped, and resent), so a frame
// never waits on held packets, which may themselves wait on it: the two
// together stay within twice the limit.
type Memory struct {
	used    atomic.Int64 // by frames
	held    atomic.Int64 // by packets held past gaps
	limit   int64
	waiting atomic.Int32 // sessions shut for lack of endpoint memory
	freed   atomic.Bool  // memory was released while some waited
	// OnFreed, if set, is called by whatever goroutine released memory
	// while sessions waited for it, after Freed became true: the owner
	// wakes up to call Env.RetryMemory.
	OnFreed func()
}

// Buffered is the bytes held: frames reserved and packets held past gaps.
func (m *Memory) Buffered() int64 { return max(m.used.Load()+m.held.Load(), 0) }

// Freed reports whether memory was released while sessions waited for it,
// so Env.RetryMemory has work.
func (m *Memory) Freed() bool { return m.freed.Load() }

// frameClaim parses the head of the frame that packet data starts and
// returns it with what it announces: the frame's bytes after the fixed
// header. A frame beyond the limits or SessionMemory gets tooLarge instead,
// and claims nothing: it is read to its end, dropped, and delivered bare
// with tooLarge as its error, so that only its call fails (a server
// answers ResourceExhausted), as on TCP. A head that is not one, or that
// announces other than the bytes of a frame ending in this packet, is the
// session's error.
func (s *Session) frameClaim(h *PacketHeader, data []byte) (wh wire.Header, claim int64, tooLarge, err error) {
	if len(data) < wire.HeaderSize {
		return wh, 0, nil, fmt.Errorf("first packet of frame %d holds %d bytes, less than a frame header: %w", h.Msg, len(data), ErrProtocol)
	}
	wh, err = wire.ParseHeader(data[:wire.HeaderSize], &s.env.cfg.Limits)
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
	if tooLarge == nil && body > uint64(s.env.cfg.SessionMemory) {
		tooLarge = fmt.Errorf("afxdp: %v frame for call %d of %d bytes, more than a session holds (%d): %w",
			wh.Kind, wh.CallID, body, s.env.cfg.SessionMemory, wire.ErrTooLarge)
	}
	if tooLarge != nil {
		return wh, 0, tooLarge, nil
	}
	return wh, int64(body), nil, nil
}

// ClaimOf is what a delivered frame holds of its session's memory: its
// bytes after the fixed header (none for one delivered bare, too large).
func ClaimOf(in *wire.Inbound) int64 { return int64(in.Header.BodyLen()) }

// reserve takes n bytes for a frame from the session's and the endpoint's
// memory, or reports false when either has no room for it now. A session
// holding nothing always has room for a frame within SessionMemory.
func (s *Session) reserve(n int64) bool {
	if used := s.mem.Load(); used > 0 && used+n > s.env.cfg.SessionMemory {
		return false
	}
	m := &s.env.Mem
	if !m.take(n) {
		if !s.memWait {
			s.memWait = true
			m.waiting.Add(1)
			s.env.memWaiters = append(s.env.memWaiters, s)
		}
		return false
	}
	s.mem.Add(n)
	return true
}

// Release gives back n bytes of a frame handed on (ClaimOf) or dropped.
// Any goroutine may call it.
func (s *Session) Release(n int64) {
	s.mem.Add(-n)
	s.env.Mem.give(n)
}

// takeHeld reserves n bytes for a held packet if they fit beside the
// frames.
func (m *Memory) takeHeld(n int64) bool {
	if m.used.Load()+m.held.Load()+n > m.limit {
		return false
	}
	m.held.Add(n) // the owner alone adds: a race only overshoots by a packet
	return true
}

// giveHeld returns a held packet's n bytes.
func (m *Memory) giveHeld(n int64) { m.held.Add(-n) }

// take reserves n bytes for a frame if they fit.
func (m *Memory) take(n int64) bool {
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

// give returns n bytes and, if sessions wait for memory, tells the owner.
func (m *Memory) give(n int64) {
	m.used.Add(-n)
	if m.waiting.Load() > 0 {
		m.freed.Store(true)
		if m.OnFreed != nil {
			m.OnFreed()
		}
	}
}
