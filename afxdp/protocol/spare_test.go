package protocol_test

import (
	"testing"

	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// TestQuietSessionFootprint: a session that went quiet holds none of what
// its busy moments needed (a ps keeps a thousand such). Requests whose
// 4 KiB of metadata ride in their heads leave no head behind once
// acknowledged; frames that put more packets in flight than the slots it
// starts with grow them and still arrive whole; a reorder buffer filled
// past a gap goes once the gap fills.
func TestQuietSessionFootprint(t *testing.T) {
	// Window 512, 1.5 KB datagrams (see newWorld).
	w := newWorld(t, &program{b: []byte{3, 1, 250, 63, 250, 63}})
	a, b := w.ends[0], w.ends[1]
	w.flushNet()
	start, _, _ := protocol.Footprint(a.s)
	for range 10 {
		a.sendMeta(4 << 10) // one call after another, as a caller makes them
		w.settle()
	}
	if slots, heads, _ := protocol.Footprint(a.s); heads > 0 || slots != start {
		t.Errorf("after 10 requests of 4 KiB of metadata, acknowledged: %d bytes of heads, %d slots (%d at first)", heads, slots, start)
	}
	for range 5 {
		a.send(0, 254) // 16129 bytes, 11 packets
	}
	w.settle()
	if slots, _, _ := protocol.Footprint(a.s); slots <= start {
		t.Errorf("55 packets sent at once: %d slots, want more than %d", slots, start)
	}
	a.send(0, 254)
	w.step()
	pkts := a.inflight
	a.inflight = nil
	if len(pkts) < 3 {
		t.Fatalf("%d packets in flight, want a frame's", len(pkts))
	}
	for _, pkt := range pkts[1:] {
		b.receive(pkt) // past the gap the first leaves
	}
	w.step()
	if _, _, reorder := protocol.Footprint(b.s); !reorder {
		t.Fatalf("B holds %d packets past a gap without a reorder buffer", len(pkts)-1)
	}
	b.receive(pkts[0])
	w.step()
	w.settle()
	if _, _, reorder := protocol.Footprint(b.s); reorder {
		t.Error("B kept its reorder buffer after the gap filled")
	}
}

// sendMeta sends a request of n bytes of metadata and no tensor.
func (e *end) sendMeta(n int) {
	id := len(e.sent)
	meta := make([]byte, n)
	for k := range meta {
		meta[k] = byte(id*7 + k)
	}
	x := &sent{meta: meta, owner: e}
	x.m = wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(id)}, Meta: meta, Done: x}
	e.sent = append(e.sent, x)
	e.s.Send(&x.m)
}
