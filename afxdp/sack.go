package afxdp

import (
	"math/bits"
	"time"
)

// Selective acknowledgement. A receiver holding packets past a gap lists
// them in its ACK (FlagSack). The sender then resends only the gaps: at
// once for a gap with dupThresh held packets above it (reordering rarely
// runs that deep), and at the retransmission timeout for the rest, skipping
// what the peer holds. Without it a timeout went back over the whole
// window, resending hundreds of packets the receiver mostly had.

// dupThresh is how many packets held above a gap make it a loss rather than
// reordering, as TCP's duplicate-ACK threshold.
const dupThresh = 3

// sendSlot is what the sender keeps about one packet in flight.
type sendSlot struct {
	sentAt   time.Duration // when first sent, since ep.epoch; 0 once resent (Karn)
	resentAt time.Duration // when last sent again, since ep.epoch; 0 if never
	held     bool          // the peer holds it past a gap (FlagSack)
}

// slot returns the state of packet seq, which must be in the window.
func (s *session) slot(seq uint32) *sendSlot { return &s.slots[seq%uint32(len(s.slots))] }

// resentLately reports whether packet seq was sent again within half the
// base timeout, which is too soon for its acknowledgement to be due.
func (s *session) resentLately(seq uint32) bool {
	at := s.slot(seq).resentAt
	return at != 0 && s.ep.now.Sub(s.ep.epoch)-at < s.rtoBase/2
}

// onSack takes the bitmap of an ACK flagged FlagSack, after onAck took its
// cumulative part. A stale one (ack behind base) is ignored.
func (s *session) onSack(ack uint32, bitmap []byte) {
	if ack != s.base || ack == s.maxSent {
		return
	}
	top, held := ack, 0 // the highest packet the peer holds, and how many
	var sample time.Duration
	for i, b := range bitmap {
		for ; b != 0; b &= b - 1 {
			seq := ack + 1 + uint32(8*i+bits.TrailingZeros8(b))
			if !seqLess(seq, s.maxSent) {
				break // never sent: a confused peer
			}
			sl := s.slot(seq)
			if !sl.held && sl.sentAt != 0 {
				sample = sl.sentAt // newly held: this ACK answers it
			}
			sl.held = true
			top = seq
			held++
		}
	}
	if sample != 0 {
		s.sampleRTT(s.ep.now.Sub(s.ep.epoch) - sample)
	}
	if held >= dupThresh {
		s.resendLost(top)
	}
}

// resendLost sends again, once per half RTO, every packet from base on that
// the peer lacks and that has dupThresh held packets above it.
func (s *session) resendLost(top uint32) {
	// Find the highest packet with dupThresh held ones above it.
	lim, n := top, 0
	for seq := top; seqLess(s.base, seq); seq-- {
		if s.slot(seq).held {
			if n++; n == dupThresh {
				lim = seq
				break
			}
		}
	}
	idx := 0
	for seq := s.base; seqLess(seq, lim); seq++ {
		if s.slot(seq).held || s.resentLately(seq) {
			continue
		}
		for om := s.out.at(idx); seq-om.first >= om.npk; om = s.out.at(idx) {
			idx++
		}
		if !s.emit(seq, idx) {
			return // no transmit buffer: the timeout covers it
		}
	}
}

// sack writes into b the bitmap an ACK flagged FlagSack carries: bit i for
// packet expect+1+i. It returns the bytes it used: up to the last packet
// held, at most len(b).
func (r *reorder) sack(b []byte, expect uint32) int {
	used, found := 0, 0
	for i := 0; found < r.held && i < len(r.has) && i/8 < len(b); i++ {
		seq := expect + 1 + uint32(i)
		k := int(seq % uint32(len(r.has)))
		if !r.has[k] || r.hdr[k].Seq != seq {
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
