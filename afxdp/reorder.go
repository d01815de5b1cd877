package afxdp

// reorder holds packets that arrived ahead of a gap, until the gap fills.
// Only such packets are copied; packets in order go straight to their
// frame's destination. Slot i holds packet number i modulo the window.
type reorder struct {
	hdr  []PacketHeader
	data [][]byte
	has  []bool
	held int
}

func newReorder(window, dataLen int) *reorder {
	r := &reorder{hdr: make([]PacketHeader, window), data: make([][]byte, window), has: make([]bool, window)}
	for i := range r.data {
		r.data[i] = make([]byte, 0, dataLen)
	}
	return r
}

// put keeps a copy of the packet; a duplicate replaces the copy it has,
// and put reports false for it.
func (r *reorder) put(h *PacketHeader, data []byte) bool {
	i := int(h.Seq % uint32(len(r.has)))
	dup := r.has[i] && r.hdr[i].Seq == h.Seq
	if !r.has[i] {
		r.held++
	}
	r.has[i] = true
	r.hdr[i] = *h
	r.data[i] = append(r.data[i][:0], data...)
	return !dup
}

// take removes and returns packet seq if held. The data stays valid until
// the slot is reused by a packet a window later.
func (r *reorder) take(seq uint32) (*PacketHeader, []byte, bool) {
	i := int(seq % uint32(len(r.has)))
	if !r.has[i] || r.hdr[i].Seq != seq {
		return nil, nil, false
	}
	r.has[i] = false
	r.held--
	return &r.hdr[i], r.data[i], true
}
