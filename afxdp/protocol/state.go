package protocol

import (
	"fmt"
	"strings"
	"time"
)

// State describes the session for a failure report: on the send side,
// what is unacknowledged, the peer's window and the timers; on the
// receive side, what is expected, held and reserved, and whether the
// window is shut. Times are from now: negative in the past, "-" for none.
// The owner calls it.
func (s *Session) State() string {
	var b strings.Builder
	r := &s.rack
	now := s.env.Now
	fmt.Fprintf(&b, "send: base %d next %d maxSent %d assign %d limit %d peerWnd %d; lost %d held %d; timer %d in %s, reorder in %s, rto %v srtt %v; progress %s",
		s.base, s.next, s.maxSent, s.assign, s.limit, s.peerWnd, r.lost, r.held,
		r.timer, until(r.timerAt, now), until(r.reoAt, now), r.rto, r.srtt, until(s.lastProgress, now))
	if s.base != s.maxSent {
		sl := s.slot(s.base)
		fmt.Fprintf(&b, "; base lost %v held %v resent %v, sent %v", sl.lost, sl.held, sl.resent, sl.xmitAt-s.clock())
	}
	for j := range s.out.len() {
		om := s.out.at(j)
		fmt.Fprintf(&b, "\n  message %d: packets %d..%d, %d bytes, withdrawn %v", om.no, om.first, om.first+om.npk-1, om.total, om.m == nil)
	}
	fmt.Fprintf(&b, "\nreceive: expect %d shut %v; frame %d active %v at %d; reserved %d, waiting for memory %v; ack owed %v, due in %s",
		s.expect, s.rxShut, s.rx.msg, s.rx.active, s.rx.off, s.mem.Load(), s.memWait, s.ackOwed, until(s.ackAt, now))
	if s.ooo != nil && s.ooo.held > 0 {
		b.WriteString("; held:")
		for i, d := range s.ooo.data {
			if d != nil {
				fmt.Fprintf(&b, " %d", s.ooo.hdr[i].Seq)
			}
		}
	}
	fmt.Fprintf(&b, "\nheard %s; endpoint memory: frames %d, held packets %d, sessions waiting %d",
		until(s.heardAt, now), s.env.Mem.used.Load(), s.env.Mem.held.Load(), s.env.Mem.waiting.Load())
	return b.String()
}

// until is t from now, or "-" for none.
func until(t, now int64) string {
	if t == 0 {
		return "-"
	}
	return time.Duration(t - now).String()
}
