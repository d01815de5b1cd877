package protocol

// reorder holds packets that arrived ahead of a gap, until the gap fills,
// and the next packet in order when there was no room to take it (see
// window.go). Only such packets are copied; packets in order go straight
// to their frame's destination. Slot i holds packet number i modulo the
// window, in a buffer of the Env's pool while it holds one.
type reorder struct {
	hdr  []PacketHeader
	data [][]byte // nil while the slot holds nothing
	held int
}

// minReorder is how many packets a reorder buffer has room for at first.
const minReorder = 16

// fit makes room for packets up to span past the next one expected, at
// most window: the ring doubles as needed, each packet held moving to its
// place in the larger one. Sized by the gaps seen, not the window, it
// costs a session that lost a packet of a small call a kilobyte or two.
func (r *reorder) fit(span uint32, window int) {
	if int(span) < len(r.data) || len(r.data) >= window {
		return
	}
	n := max(len(r.data), minReorder)
	for n <= int(span) {
		n *= 2
	}
	n = min(n, window)
	hdr, data := make([]PacketHeader, n), make([][]byte, n)
	for i, d := range r.data {
		if d != nil {
			j := r.hdr[i].Seq % uint32(n)
			hdr[j], data[j] = r.hdr[i], d
		}
	}
	r.hdr, r.data = hdr, data
}

func (r *reorder) index(seq uint32) int { return int(seq % uint32(len(r.data))) }

// has reports whether packet seq is held.
func (r *reorder) has(seq uint32) bool {
	i := r.index(seq)
	return r.data[i] != nil && r.hdr[i].Seq == seq
}

// put keeps a copy of the packet, in a buffer from p, and reports whether
// it was new: false for a duplicate of one held. When p has no memory for
// it, the packet is not kept (its sender sends it again).
func (r *reorder) put(h *PacketHeader, data []byte, p *oooPool) bool {
	i := r.index(h.Seq)
	if r.data[i] != nil {
		if r.hdr[i].Seq == h.Seq {
			return false
		}
		// A packet a window old still held: cannot be, as the
		// window moves past it only once it is taken. Replace it.
		r.hdr[i] = *h
		r.data[i] = append(r.data[i][:0], data...)
		return true
	}
	buf := p.get()
	if buf == nil {
		return true
	}
	r.hdr[i] = *h
	r.data[i] = append(buf, data...)
	r.held++
	return true
}

// take removes packet seq if held and returns it with its buffer, which
// the caller gives back to the pool or to restore.
func (r *reorder) take(seq uint32) (PacketHeader, []byte, bool) {
	i := r.index(seq)
	if r.data[i] == nil || r.hdr[i].Seq != seq {
		return PacketHeader{}, nil, false
	}
	buf := r.data[i]
	r.data[i] = nil
	r.held--
	return r.hdr[i], buf, true
}

// restore holds again a packet take returned, in its buffer.
func (r *reorder) restore(h PacketHeader, buf []byte) {
	i := r.index(h.Seq)
	r.hdr[i], r.data[i] = h, buf
	r.held++
}

// free gives every buffer back to p.
func (r *reorder) free(p *oooPool) {
	for i, b := range r.data {
		if b != nil {
			p.put(b)
			r.data[i] = nil
		}
	}
	r.held = 0
}

// oooPool lends the buffers reorder buffers hold packets in, each counted
// in the Env's memory while lent, and keeps some returned ones for
// reuse. It belongs to the Env's owner.
type oooPool struct {
	e    *Env
	free [][]byte
}

// oooPoolKeep bounds the returned buffers a pool keeps.
const oooPoolKeep = 1024

// get returns an empty buffer for a packet, or nil when the Env's
// memory has no room for one.
func (p *oooPool) get() []byte {
	size := p.e.dataLen
	if !p.e.Mem.takeHeld(int64(size)) {
		return nil
	}
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		return b[:0]
	}
	return make([]byte, 0, size)
}

// put takes a buffer back.
func (p *oooPool) put(b []byte) {
	p.e.Mem.giveHeld(int64(p.e.dataLen))
	if len(p.free) < oooPoolKeep {
		p.free = append(p.free, b)
	}
}
