package protocol

import (
	"math/bits"
	"time"
)

// Selective acknowledgement. A receiver holding packets past a gap lists
// them in its ACK (FlagSack). The sender counts those packets delivered,
// which is what its loss detection (rack.go) works from, and never sends
// them again: a timeout or a probe resends only what the peer lacks.

// dupThresh is how many packets held past a gap make RACK, before it has
// seen any reordering, give up waiting for a reordering window, as TCP's
// duplicate-ACK threshold.
const dupThresh = 3

// onSack takes the bitmap of an ACK flagged FlagSack, after onAck took its
// cumulative part. A stale one (ack behind base) is ignored.
func (s *Session) onSack(ack uint32, bitmap []byte) {
	if ack != s.base || ack == s.maxSent {
		return
	}
	news := 0
	s.sackBits(ack, bitmap, func(uint32, *sendSlot) { news++ })
	if news == 0 {
		return
	}
	fack := s.rack.fack
	var sample time.Duration
	s.sackBits(ack, bitmap, func(seq uint32, sl *sendSlot) {
		if sl.sentAt != 0 {
			sample = sl.sentAt // newly held: this ACK answers it
		}
		sl.held = true
		s.rack.held++
		if sl.lost {
			sl.lost = false
			s.rack.lost--
		}
		s.delivered(seq, sl, fack)
		s.rack.newFack(seq)
	})
	if sample != 0 {
		s.sampleRTT(s.clock() - sample)
	}
	s.progressed()
}

// sack writes into b the bitmap an ACK flagged FlagSack carries: bit i for
// packet expect+1+i. It returns the bytes it used: up to the last packet
// held, at most len(b).
func (r *reorder) sack(b []byte, expect uint32) int {
	used, found := 0, 0
	for i := 0; found < r.held && i < len(r.data) && i/8 < len(b); i++ {
		seq := expect + 1 + uint32(i)
		if !r.has(seq) {
			continue
		}
		if i/8 >= used {
			clear(b[used : i/8+1])
			used = i/8 + 1
		}
		b[i/8] |= 1 << (i % 8)
		found++
	}
	return used
}

// sackBits calls f for every packet the bitmap of an ACK at ack shows held
// that was sent and not known held before.
func (s *Session) sackBits(ack uint32, bitmap []byte, f func(seq uint32, sl *sendSlot)) {
	for i, b := range bitmap {
		for ; b != 0; b &= b - 1 {
			seq := ack + 1 + uint32(8*i+bits.TrailingZeros8(b))
			if !seqLess(seq, s.maxSent) {
				return // never sent: a confused peer
			}
			if sl := s.slot(seq); !sl.held {
				f(seq, sl)
			}
		}
	}
}
