package xsk

// frameStack is the process-local LIFO of free chunk addresses. LIFO keeps
// recently used chunks, still warm in cache, in circulation. Push and pop
// are O(1); nothing ever scans the UMEM.
type frameStack struct {
	addrs []uint64
	n     int
}

func newFrameStack(count int, frameSize uint64) frameStack {
	s := frameStack{addrs: make([]uint64, count), n: count}
	// Lowest addresses on top, so a fresh socket hands out chunk 0 first.
	for i := range count {
		s.addrs[count-1-i] = uint64(i) * frameSize
	}
	return s
}

func (s *frameStack) pop() (uint64, bool) {
	if s.n == 0 {
		return 0, false
	}
	s.n--
	return s.addrs[s.n], true
}

// push returns a chunk and reports whether it fit. A push beyond capacity
// means a chunk was freed twice; it is dropped rather than overrunning the
// stack. (A double free below capacity is not detected: it would cost a
// bitmap per chunk on the hot path.)
func (s *frameStack) push(addr uint64) bool {
	if s.n == len(s.addrs) {
		return false
	}
	s.addrs[s.n] = addr
	s.n++
	return true
}
