package staleness

import (
	"context"
	"sync"

	"github.com/starwire/starwire/wire"
)

// store holds the newest parameter version on the server. A blob received
// over starwire is kept in its receive buffer (buf, one reference owned by
// the store); one received over gRPC is a plain slice.
type store struct {
	mu      sync.Mutex
	version uint64
	data    []byte
	buf     *wire.Buffer
	// next is closed, and replaced, when a newer version lands or the
	// store closes: what callers of await wait on.
	next   chan struct{}
	closed bool
}

// await returns the newest version, and its blob, as soon as it is newer
// than have; ok is false when ctx ended or the store closed first. The
// caller owns the returned buf reference, as get's.
func (s *store) await(ctx context.Context, have uint64) (version uint64, data []byte, buf *wire.Buffer, ok bool) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return 0, nil, nil, false
		}
		if s.version > have {
			if s.buf != nil {
				s.buf.Ref()
			}
			v, d, b := s.version, s.data, s.buf
			s.mu.Unlock()
			return v, d, b, true
		}
		if s.next == nil {
			s.next = make(chan struct{})
		}
		next := s.next
		s.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return 0, nil, nil, false
		}
	}
}

// wake wakes every caller of await; s.mu is held.
func (s *store) wake() {
	if s.next != nil {
		close(s.next)
		s.next = nil
	}
}

// put replaces the blob when version is newer, taking ownership of buf's
// reference either way.
func (s *store) put(version uint64, data []byte, buf *wire.Buffer) {
	s.mu.Lock()
	if version <= s.version {
		s.mu.Unlock()
		buf.Release()
		return
	}
	old := s.buf
	s.version, s.data, s.buf = version, data, buf
	s.wake()
	s.mu.Unlock()
	old.Release()
}

// get returns the newest version, and its blob when it is newer than have.
// The caller owns the returned buf reference (nil for gRPC blobs).
func (s *store) get(have uint64) (version uint64, data []byte, buf *wire.Buffer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version <= have {
		return s.version, nil, nil
	}
	if s.buf != nil {
		s.buf.Ref()
	}
	return s.version, s.data, s.buf
}

func (s *store) close() {
	s.mu.Lock()
	buf := s.buf
	s.buf, s.data = nil, nil
	s.closed = true
	s.wake()
	s.mu.Unlock()
	buf.Release()
}
