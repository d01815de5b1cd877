package afxdp_test

import (
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/afxdp/protocol"
	"github.com/starwire/starwire/internal/testwait"
	"github.com/starwire/starwire/wire"
)

// FuzzPeerPackets has a peer that follows no rule send an endpoint
// whatever the fuzz input holds, for the session it opened and for
// others, while the endpoint has a frame of its own in flight to it: data
// at any number and offset, acknowledgements of anything with selective
// and duplicate reports and echoes, probes, OPENs, CLOSEs and RESETs. The
// endpoint must not panic, must hold no more memory than its bounds, and
// must still serve a well-behaved session afterwards. A chunk's packet
// carries its session's token unless its selector's bit 2 is set, when
// it keeps the input's, and the endpoint must drop it (forged OPENs are
// the input's too). Seeds are real packets of each kind.
func FuzzPeerPackets(f *testing.F) {
	pkt := func(h protocol.PacketHeader, data []byte) []byte {
		h.Length = uint16(len(data))
		b := make([]byte, protocol.HeaderLen+len(data))
		protocol.PutHeader(b, &h)
		copy(b[protocol.HeaderLen:], data)
		return b
	}
	frame := func(meta string, tensor int) []byte {
		m := &wire.Message{Header: wire.Header{Kind: wire.KindRequest, CallID: 7}, Meta: []byte(meta)}
		if tensor > 0 {
			m.Tensors = []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(tensor)}, Data: make([]byte, tensor)}}
		}
		b, _ := wire.AppendHead(nil, m)
		return append(b, make([]byte, tensor)...)
	}
	// A chunk is a length byte, a session selector byte and a packet.
	chunks := func(pkts ...[]byte) []byte {
		var in []byte
		for i, p := range pkts {
			in = append(in, byte(len(p)), byte(i%3))
			in = append(in, p...)
		}
		return in
	}
	small := frame("hi", 0)
	f.Add(chunks(
		pkt(protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast, Window: 64}, small),
		pkt(protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagGap | protocol.FlagSack, Ack: 0, Window: 64, Offset: 1<<40 | 2}, []byte{0x05}),
		pkt(protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagDsack, Msg: 1, Ack: 1, Window: 64}, nil),
	))
	f.Add(chunks(
		pkt(protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst, Seq: 0, Window: 0}, frame("", 100)[:60]),
		pkt(protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagLast, Seq: 2, Window: 64, Offset: 60}, frame("", 100)[60:]),
		pkt(protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagProbe, Window: 64}, nil),
		pkt(protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast | protocol.FlagPacked, Seq: 1, Tx: 3, Window: 64},
			append(append([]byte{byte(len(small)), 0}, small...), append([]byte{byte(len(small)), 0}, small...)...)),
	))
	f.Add(chunks(
		pkt(protocol.PacketHeader{Type: protocol.TypeOpen, Window: 64, Offset: 60}, nil),
		pkt(protocol.PacketHeader{Type: protocol.TypeAck, Flags: protocol.FlagSize, Window: 64, Offset: 1472}, nil),
		pkt(protocol.PacketHeader{Type: protocol.TypeClose}, nil),
		pkt(protocol.PacketHeader{Type: protocol.TypeReset}, nil),
	))
	f.Fuzz(func(t *testing.T, in []byte) {
		opts := afxdp.Options{Ticket: testTicket, SessionMemory: 1 << 20, EndpointMemory: 2 << 20, DeadAfter: time.Second, Window: 64}
		la, lb := link.MemPair(memA, memB, link.MemOptions{})
		srv := afxdp.NewEndpoint(la, opts)
		var wg sync.WaitGroup
		defer func() { srv.Close(); wg.Wait() }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := true; ; first = false {
				c, err := srv.Accept()
				if err != nil {
					return
				}
				wg.Add(1)
				go func() { defer wg.Done(); c.Receive(discard{}) }()
				if first { // a frame of its own in flight, to be acknowledged anyhow
					data := make([]byte, 20_000)
					c.Send(&wire.Message{Header: wire.Header{Kind: wire.KindResponse, CallID: 1},
						Tensors: []wire.Tensor{{DType: wire.DTUint8, Shape: []int64{int64(len(data))}, Data: data}}})
				}
			}
		}()
		p := &rawPeer{l: lb, to: memA}
		p.open(t, 1)
		ids := [3]uint64{1, 2, 1 << 40}
		// What the handshake sent, counted at the peer: the endpoint's
		// own count may not yet include the handshake's last ACK, and
		// waiting for that many would leave the last forged packet
		// unhandled when the counts are compared.
		sent := p.sent
		// DATA and ACKs of session 1 without its token: dropped as such,
		// or as malformed, or answered with RESET once it ended.
		forged := uint64(0)
		for len(in) >= 2 {
			n, sel := int(in[0]), in[1]
			in = in[2:]
			n = min(n, len(in))
			b := append([]byte(nil), in[:n]...)
			in = in[n:]
			if len(b) >= protocol.HeaderLen {
				// Past the magic, version and session: the rest is the
				// input's.
				ok := make([]byte, protocol.HeaderLen)
				protocol.PutHeader(ok, &protocol.PacketHeader{Type: protocol.TypeAck, Session: ids[sel%3], Token: p.tok[ids[sel%3]]})
				copy(b[:3], ok[:3])
				copy(b[8:16], ok[8:16])
				if sel&4 == 0 {
					copy(b[40:48], ok[40:48])
				} else if tok := p.tok[ids[sel%3]]; tok != 0 && binary.LittleEndian.Uint64(b[40:]) != tok &&
					(b[3] == byte(protocol.TypeData) || b[3] == byte(protocol.TypeAck)) {
					forged++
				}
			}
			buf := lb.TxBuffer()
			lb.Queue(copy(buf, b), memA)
			sent++
		}
		if err := lb.Flush(); err != nil {
			t.Fatal(err)
		}
		testwait.Eventually(t, 5*time.Second, func() bool {
			lb.Receive(p.rx[:]) // drains the answers, so that the link never fills
			return srv.Stats().Received >= sent
		}, "the endpoint to receive the %d datagrams", sent)
		if st := srv.Stats(); st.Buffered > 2*uint64(opts.EndpointMemory) {
			t.Fatalf("%d bytes held, bound %d", st.Buffered, opts.EndpointMemory)
		} else if st.BadTokens+st.Malformed+st.Resets < forged {
			t.Fatalf("%d packets without their session's token, %d dropped for it, %d malformed, %d reset", forged, st.BadTokens, st.Malformed, st.Resets)
		}
		// A well-behaved session still gets its frame taken.
		p.open(t, 99)
		p.send(t, protocol.PacketHeader{Type: protocol.TypeData, Flags: protocol.FlagFirst | protocol.FlagLast, Session: 99, Window: 64}, small)
		p.await(t, 99, "acknowledgement of a well-formed frame", func(h protocol.PacketHeader) bool { return h.Ack == 1 })
	})
}
