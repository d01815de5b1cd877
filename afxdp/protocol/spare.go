package protocol

import "github.com/starwire/starwire/wire"

// What a session needs only while it is busy is lent by its Env and given
// back when the session goes quiet, so that an idle session (most of a
// parameter server's thousand) holds a few hundred bytes of it, not what
// its busiest moment needed: the encoded heads of messages in flight (a
// head holds the message's metadata, kilobytes for a call whose request
// rides in it), the reorder buffer of a session that saw a gap, and the
// send window's slots (grown with what is in flight, see growSlots).

// smallHead is the largest encoded head a message slot keeps for the next
// message queued there; larger ones go back to the Env.
const smallHead = 256

// spareHeadBytes bounds the bytes of the heads an Env keeps for reuse,
// and spareHeadMax one such head.
const (
	spareHeadBytes = 1 << 20
	spareHeadMax   = 64 << 10
)

// spareReorders bounds the reorder buffers an Env keeps for reuse.
const spareReorders = 8

// minSlots is how many send slots a session starts with.
const minSlots = 16

// spares is what an Env keeps for its sessions to borrow.
type spares struct {
	heads     [][]byte
	headBytes int
	reorders  []*reorder
}

// headFor returns om's head buffer, or a spare one of the Env with room
// for m's fixed header and metadata when om's is too small for them.
func (s *Session) headFor(om *outMsg, m *wire.Message) []byte {
	need := wire.HeaderSize + len(m.Meta)
	sp := &s.env.spare
	if cap(om.head) >= need || len(sp.heads) == 0 {
		return om.head[:0]
	}
	n := len(sp.heads) - 1
	h := sp.heads[n]
	if cap(h) < need {
		return om.head[:0] // AppendHead grows it; the spare waits for a smaller one
	}
	sp.heads[n] = nil
	sp.heads = sp.heads[:n]
	sp.headBytes -= cap(h)
	return h[:0]
}

// retireHead gives the head of om, which left the stream, back to the
// Env if it is larger than a slot keeps.
func (s *Session) retireHead(om *outMsg) {
	h := om.head
	if cap(h) <= smallHead {
		return
	}
	om.head = nil
	sp := &s.env.spare
	if cap(h) > spareHeadMax || sp.headBytes+cap(h) > spareHeadBytes {
		return
	}
	sp.heads = append(sp.heads, h)
	sp.headBytes += cap(h)
}

// newReorder returns a reorder buffer for s, a spare one if the Env has
// one.
func (s *Session) newReorder() *reorder {
	sp := &s.env.spare
	if n := len(sp.reorders); n > 0 {
		r := sp.reorders[n-1]
		sp.reorders[n-1] = nil
		sp.reorders = sp.reorders[:n-1]
		return r
	}
	return &reorder{}
}

// retireReorder gives s's reorder buffer back once it holds nothing: the
// gap it waited on is filled.
func (s *Session) retireReorder() {
	r := s.ooo
	if r == nil || r.held > 0 {
		return
	}
	s.ooo = nil
	if sp := &s.env.spare; len(sp.reorders) < spareReorders {
		sp.reorders = append(sp.reorders, r)
	}
}

// growSlots makes room for one more packet in flight: the slots double, up
// to the window, each packet in flight moving to its place in the larger
// ring.
func (s *Session) growSlots() {
	n := min(2*len(s.slots), s.env.cfg.Window)
	if n <= len(s.slots) {
		return
	}
	ns := make([]sendSlot, n)
	for seq := s.base; seqLess(seq, s.maxSent); seq++ {
		ns[seq%uint32(n)] = *s.slot(seq)
	}
	s.slots = ns
}
