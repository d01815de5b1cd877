package afxdp

// reorder holds packets that arrived ahead of a gap, until the gap fills.
// Only such packets are copied; packets in order go straight to their
// frame's destination. Slot i holds packet number i modulo the window; a
// slot's buffer is allocated the first time it holds a packet, counted in
// the endpoint's memory, and kept until the session ends.
type reorder struct {
	hdr     []PacketHeader
	data    [][]byte
	has     []bool
	held    int
	dataLen int
	bytes   int // buffer bytes allocated, counted in the endpoint's memory
}

func newReorder(window, dataLen int) *reorder {
	return &reorder{hdr: make([]PacketHeader, window), data: make([][]byte, window), has: make([]bool, window), dataLen: dataLen}
}

// put keeps a copy of the packet; a duplicate replaces the copy it has,
// and put reports false for it. A slot without a buffer gets one if mem
// has room for it; if not, the packet is not kept (the sender resends it)
// and put reports true.
func (r *reorder) put(h *PacketHeader, data []byte, mem *memory) bool {
	i := int(h.Seq % uint32(len(r.has)))
	dup := r.has[i] && r.hdr[i].Seq == h.Seq
	if r.data[i] == nil {
		if !mem.take(int64(r.dataLen)) {
			return true
		}
		r.data[i] = make([]byte, 0, r.dataLen)
		r.bytes += r.dataLen
	}
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

// free drops every buffer, returning its memory to e.
func (r *reorder) free(e *Endpoint) {
	if r.bytes > 0 {
		e.mem.give(e, int64(r.bytes))
	}
	*r = reorder{}
}
