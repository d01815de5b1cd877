package afxdp_test

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// TestSmallFramesSharePackets: small frames sent together travel packed,
// many to a packet, and arrive whole and in order, delivered on the
// reactor and from a Receive goroutine alike. A frame too big to share a
// packet, queued among them, still arrives in its place.
func TestSmallFramesSharePackets(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		name := map[bool]string{false: "on reactor", true: "blocking receiver"}[blocking]
		t.Run(name, func(t *testing.T) {
			la, lb := link.MemPair(memA, memB, link.MemOptions{})
			// Deliveries of 1: the reactor must wait for room for a whole
			// packet's frames, not overfill the queue or stall.
			ea, _, ca, cb := connected(t, la, lb, afxdp.Options{Ticket: testTicket, BlockingReceiver: blocking, Deliveries: 1})
			const frames = 300
			rb := newCollector(frames)
			go cb.Receive(rb)
			big := pattern(3*la.MaxPayload(), 4)
			done := make(doneChan, frames)
			// The frames are sent while the sender's reactor is busy, as
			// a burst finds it on a loaded endpoint: sent to an idle one,
			// each would go out at once, alone in its packet, on the
			// sending goroutine or on another reactor that helps.
			release := holdReactor(t, ca, cb)
			before := ea.Stats().Sent
			for i := range frames {
				m := &wire.Message{
					Header: wire.Header{Kind: wire.KindRequest, CallID: uint64(i + 1)},
					Meta:   binary.LittleEndian.AppendUint64(make([]byte, 0, 64), uint64(i)),
					Done:   done,
				}
				if i == frames/2 {
					m.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(big))}, Data: big}}
				}
				if err := ca.Send(m); err != nil {
					t.Fatal(err)
				}
			}
			release()
			for i := range frames {
				in := rb.next(t, 10*time.Second)
				if in.Err != nil || in.Header.CallID != uint64(i+1) || binary.LittleEndian.Uint64(in.Meta) != uint64(i) {
					t.Fatalf("frame %d: call %d, meta %x, err %v", i, in.Header.CallID, in.Meta, in.Err)
				}
				if i == frames/2 && string(in.Tensors[0].Data) != string(big) {
					t.Fatal("the large frame among the small ones differs")
				}
				in.Release()
			}
			for range frames {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			// One frame a packet would be 300 packets and more; the
			// reactor may take the queue in a few batches.
			if sent := ea.Stats().Sent - before; sent > frames/4 {
				t.Fatalf("%d small frames took %d packets", frames, sent)
			}
		})
	}
}

// holdReactor keeps a's reactor in the Alloc of a frame b sends it, until
// the returned func is called. Alloc runs on the reactor under its loop
// lock in either delivery mode, so meanwhile a's sends only queue. A first
// frame, delivered, shows that a's receiver is in place, since a frame
// that comes before it gets a pooled buffer without an Alloc.
func holdReactor(t *testing.T, a, b *afxdp.Conn) (release func()) {
	t.Helper()
	h := &allocHolder{delivered: make(chan struct{}, 1), entered: make(chan struct{}), release: make(chan struct{})}
	release = sync.OnceFunc(func() { close(h.release) })
	t.Cleanup(release)
	go a.Receive(h)
	send := func(id uint64, reached <-chan struct{}) {
		if err := b.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: id}, Meta: []byte("hold")}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-reached:
		case <-time.After(10 * time.Second):
			t.Fatalf("frame %d, sent to hold the reactor, not received in 10s", id)
		}
	}
	send(1, h.delivered)
	send(holdCall, h.entered)
	return release
}

// holdCall is the frame an allocHolder holds the reactor in.
const holdCall = 2

// allocHolder is a wire.Receiver that holds the reactor in the Alloc of
// frame holdCall until release is closed.
type allocHolder struct {
	delivered, entered, release chan struct{}
}

func (h *allocHolder) Alloc(in *wire.Inbound) error {
	if in.Header.CallID == holdCall {
		close(h.entered)
		<-h.release
	}
	in.AllocPooled()
	return nil
}

func (h *allocHolder) Deliver(in *wire.Inbound) {
	if in.Header.CallID != holdCall {
		select {
		case h.delivered <- struct{}{}:
		default:
		}
	}
	in.Release()
}

// forgeLink replaces, when armed, the next DATA packet it receives with a
// packed packet whose framing is broken (a length past its end), keeping
// the original's session and numbers, as a faulty peer would send it.
type forgeLink struct {
	link.Link
	armed atomic.Bool
	buf   [protocol.HeaderLen + 8]byte
}

func (l *forgeLink) Receive(pkts []link.Datagram) (int, error) {
	n, err := l.Link.Receive(pkts)
	for i := range pkts[:n] {
		h, _, herr := protocol.DecodeHeader(pkts[i].Data)
		if herr != nil || h.Type != protocol.TypeData || !l.armed.CompareAndSwap(true, false) {
			continue
		}
		h.Flags, h.Offset, h.Length = protocol.FlagFirst|protocol.FlagLast|protocol.FlagPacked, 0, 8
		protocol.PutHeader(l.buf[:], &h)
		copy(l.buf[protocol.HeaderLen:], []byte{5, 0, 'a', 'b', 'c', 'd', 'e', 9}) // then a length cut short
		pkts[i].Data = l.buf[:]
	}
	return n, err
}

// TestMalformedPackedPacket: a packed packet whose framing is broken ends
// its session with ErrProtocol; the endpoint goes on serving its other
// sessions.
func TestMalformedPackedPacket(t *testing.T) {
	la, lb := link.MemPair(memA, memB, link.MemOptions{})
	forge := &forgeLink{Link: lb}
	ea, eb, ca, cb := connected(t, la, forge, afxdp.Options{Ticket: testTicket})
	received := make(chan error, 1)
	go func() { received <- cb.Receive(newCollector(16)) }()
	forge.armed.Store(true)
	if err := ca.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 1}, Meta: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-received:
		if !errors.Is(err, afxdp.ErrProtocol) {
			t.Fatalf("session ended with %v, want ErrProtocol", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the broken packet did not end the session")
	}
	// A new session on the same endpoints works.
	c2, s2 := session(t, ea, eb)
	rb := newCollector(1)
	go s2.Receive(rb)
	if err := c2.Send(&wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 2}, Meta: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if in := rb.next(t, 5*time.Second); in.Header.CallID != 2 || string(in.Meta) != "y" {
		t.Fatalf("second session got call %d %q", in.Header.CallID, in.Meta)
	}
}
