package afxdp_test

import (
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/wire"
)

// dropLink loses chosen DATA packets on receive: drops[k] times the packet
// k places after the first DATA packet it sees. Only the reactor calls
// Receive, so the map needs no lock; read it after the test's frame landed.
type dropLink struct {
	link.Link
	drops   map[uint32]int
	first   uint32
	started bool
}

func (l *dropLink) Receive(pkts []link.Datagram) (int, error) {
	n, err := l.Link.Receive(pkts)
	kept := 0
	for _, d := range pkts[:n] {
		h, _, herr := protocol.DecodeHeader(d.Data)
		if herr == nil && h.Type == protocol.TypeData {
			if !l.started {
				l.first, l.started = h.Seq, true
			}
			if k := h.Seq - l.first; l.drops[k] > 0 {
				l.drops[k]--
				continue
			}
		}
		pkts[kept] = d
		kept++
	}
	return kept, err
}

// TestSelectiveAckResendsOnlyGaps: the retransmission of a lost packet is
// lost too, so recovery waits for the timeout; then only the gaps go
// again, not the hundreds of packets the receiver holds past them (going
// back N resent all of them). On fake time: no packet is late, so every
// resend is a loss's.
func TestSelectiveAckResendsOnlyGaps(t *testing.T) {
	tests := []struct {
		name   string
		drops  map[uint32]int
		resent uint64 // packets the sender resends: one per drop
	}{
		{"one gap, its resend lost", map[uint32]int{20: 2}, 2},
		{"three gaps", map[uint32]int{20: 2, 90: 1, 250: 2}, 5},
		{"the last packet", map[uint32]int{299: 1}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeTime(t, func(t *testing.T) {
				la, lb := link.MemPair(memA, memB, link.MemOptions{})
				lossy := &dropLink{Link: lb, drops: tt.drops}
				ea, _, ca, cb := connected(t, la, lossy, fakeOptions(afxdp.Options{RTO: 20 * time.Millisecond}))
				rb := newCollector(1)
				go cb.Receive(rb)
				// 300 packets; the dial's packets are not DATA.
				data := pattern(300*(la.MaxPayload()-protocol.HeaderLen)-200, 9)
				done := make(doneChan, 1)
				m := &wire.Message{
					Header:  wire.Header{Kind: wire.KindRequest, CallID: 1},
					Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}},
					Done:    done,
				}
				if err := ca.Send(m); err != nil {
					t.Fatal(err)
				}
				in := rb.next(t, 10*time.Second)
				defer in.Release()
				if string(in.Tensors[0].Data) != string(data) {
					t.Fatal("tensor bytes differ")
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				for k, left := range lossy.drops {
					if left != 0 {
						t.Fatalf("packet %d was not dropped %d more times: the frame was shorter than the test thinks", k, left)
					}
				}
				st := ea.Stats()
				t.Logf("resent %d, probes %d", st.Resent, st.Probes)
				if st.Resent != tt.resent {
					t.Fatalf("resent %d packets, want %d", st.Resent, tt.resent)
				}
			})
		})
	}
}
