package protocol_test

import (
	"testing"

	"github.com/starwire/starwire/afxdp/protocol"
)

// TestShutWindowProbed: a window shut for longer than the dead-peer
// timeout does not end the session, as the sender's probes are answered;
// and when the ACK that reopens it is lost, or the receiver was not told
// of the room made, the probes have it reopen and learn of it within a
// retransmission timeout, not by a keepalive or the dead-peer timeout. Of
// A's five frames of 16 KiB, B, which may hold 64 KiB, takes four and
// keeps the first packet of the fifth without taking it. With a gap
// before that packet, it arrived past the gap and A knows it held
// (selectively acknowledged), so a probe cannot be a resend of it; in
// order, it was not acknowledged at all.
func TestShutWindowProbed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		gap, unmet bool // unmet: the receiver's Recheck is not met
	}{
		{"held past a gap, reopening lost", true, false},
		{"in order, reopening lost", false, false},
		{"held past a gap, room unnoticed", true, true},
		{"in order, room unnoticed", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Window 512, endpoint memory 128 KiB (room for packets held
			// past gaps), 1.5 KB datagrams, room for 63 frames each.
			w := newWorld(t, &program{b: []byte{3, 1, 250, 63, 250, 63}})
			a, b := w.ends[0], w.ends[1]
			w.flushNet() // the handshake
			for range 5 {
				a.send(0, 254) // 16129 bytes
			}
			w.step()
			first := -1 // the first packet of the fifth frame
			for i, pkt := range a.inflight {
				h, _, err := protocol.DecodeHeader(pkt)
				if err != nil {
					t.Fatal(err)
				}
				if h.Type == protocol.TypeData && h.Msg == 4 && h.Flags&protocol.FlagFirst != 0 {
					first = i
				}
			}
			if first < 1 {
				t.Fatalf("no first packet of frame 4 among %d in flight", len(a.inflight))
			}
			pkts := a.inflight
			a.inflight = nil
			deliver := func(from *end, pkts [][]byte) {
				for _, pkt := range pkts {
					from.peer().receive(pkt)
				}
				w.step()
			}
			if tc.gap {
				deliver(a, pkts[:first-1])
				deliver(a, pkts[first:])
				deliver(b, b.inflight) // A learns what B holds past the gap
				b.inflight = nil
				deliver(a, pkts[first-1:first])
			} else {
				deliver(a, pkts)
			}
			deliver(b, b.inflight) // window 0
			b.inflight = nil
			if b.delivered != 4 {
				t.Fatalf("B took %d frames with its window shut, want 4", b.delivered)
			}
			// B's receiver reads nothing for longer than DeadAfter: A
			// probes, and B's answers keep the session alive.
			for shut := w.now; w.now.Sub(shut) < 2*w.cfg.DeadAfter; {
				w.flushNet()
				if a.ended != nil || b.ended != nil {
					t.Fatalf("the session ended %v after B's window shut: %s", w.now.Sub(shut), w.state())
				}
				w.toNextTimer()
			}
			b.up.consume()
			if tc.unmet {
				b.up.recheck = false
				w.step()
				if b.delivered != 4 || len(b.inflight) != 0 {
					t.Fatalf("B took %d frames, sent %d packets, without a Reopen", b.delivered, len(b.inflight))
				}
			} else {
				w.step()
				if b.delivered != 5 || len(b.inflight) == 0 {
					t.Fatalf("B took %d frames, sent %d packets, after its receiver made room; want 5 and its reopening", b.delivered, len(b.inflight))
				}
				b.inflight = nil // the reopening ACK is lost
			}
			start := w.now
			for !w.settled() {
				if d := w.now.Sub(start); d > w.cfg.MaxRTO {
					t.Fatalf("A had not learnt of the reopened window %v after room was made, more than MaxRTO (%v): %s", d, w.cfg.MaxRTO, w.state())
				}
				w.flushNet()
				if !w.settled() {
					w.toNextTimer()
				}
			}
			w.settle()
		})
	}
}
