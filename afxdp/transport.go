package afxdp

// The reliable packet transport, in brief.
//
// Layers, bottom up:
//
//   - A Link moves datagrams, with buffers it owns and batched system
//     calls: XSKLink (AF_XDP sockets, one per queue of an interface, with
//     Ethernet/IPv4/UDP headers written in place), UDPLink (a kernel UDP
//     socket with sendmmsg/recvmmsg) and MemLink (an in-memory pair with
//     seeded loss, reordering and duplication, for tests).
//   - An Endpoint runs the protocol over one Link on one reactor goroutine
//     and turns it into sessions; a session is a Conn, which has the shape
//     of rpc.Conn (package afxdprpc adapts it).
//
// The protocol. A session carries frames in both directions. Each direction
// is a stream of packets numbered from 0; a frame (the head that
// wire.AppendHead encodes, then the tensors' bytes) is cut into packets of
// MaxPayload-HeaderLen bytes, the first flagged First and the last Last, a
// packet never holding bytes of two frames. Packet data is copied into the
// link's transmit buffer straight from the encoded head and the tensors'
// own memory, and copied again on a retransmission, so nothing but the
// packet buffers ever holds a second copy.
//
// Reliability is go-back-N with cumulative acknowledgements: every packet
// carries the next packet number its sender expects and a credit (the
// window). The sender keeps at most a window of packets unacknowledged;
// when the oldest has waited RTO (milliseconds, doubling on each expiry up
// to MaxRTO), it sends the window again from there. Because reordering on a
// veth or a NIC queue is common and costs a whole window under strict
// go-back-N, the receiver keeps packets that arrive past a gap in a reorder
// buffer of one window (the only place received data is copied twice) and
// reports the gap: the sender resends just the missing packet after three
// duplicate acknowledgements or an acknowledgement that moves but still
// reports a gap, as TCP's fast retransmit does. Packets before the expected
// number are duplicates and dropped, so a request is delivered, and runs,
// at most once.
//
// Reassembly lands in-order data directly in its destination: the header
// and metadata are gathered first, then the receiver's Alloc chooses the
// tensors' buffers, and every later packet is copied to
// Inbound.PayloadDest. A frame is delivered when its Last packet lands. A
// message completes (m.Done) when the peer has acknowledged its last packet,
// which is when its memory may change.
//
// Flow control: the receiver's credit bounds what is in flight, and a frame
// whose delivery queue is full is not acknowledged, so the sender backs off
// on its timeout until Receive catches up.
//
// Sessions start with OPEN, answered by an ACK (RESET when the endpoint
// does not accept); CLOSE ends one, and a packet for an unknown session is
// answered with RESET. A session whose packets go unacknowledged for
// DeadAfter ends with ErrPeerUnreachable, completing every message it held.
