package staleness

import (
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
	s.mu.Unlock()
	buf.Release()
}
