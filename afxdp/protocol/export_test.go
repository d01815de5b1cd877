package protocol

// Footprint is what s holds for its busy moments (spare.go): its send
// slots, the bytes of encoded heads its message ring keeps beyond what a
// slot may, and whether it keeps a reorder buffer.
func Footprint(s *Session) (slots, bigHeads int, reorder bool) {
	for i := range s.out.buf {
		if c := cap(s.out.buf[i].head); c > smallHead {
			bigHeads += c
		}
	}
	return len(s.slots), bigHeads, s.ooo != nil
}
