package bench

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// The raw TCP baseline speaks the least protocol that can carry the same
// calls, so that it measures what the kernel and the Go runtime cost and
// nothing else. A client opens a connection with one mode byte:
//
//   - RawModeEcho: frames of a little-endian u32 length and that many bytes;
//     the server sends every complete frame back, all the frames one read
//     returned in one write.
//   - RawModeFetch: requests of a little-endian u64 size; the server answers
//     each with the same u64 and that many bytes of a buffer it holds,
//     written straight from that buffer.
const (
	RawModeEcho  byte = 'E'
	RawModeFetch byte = 'F'
)

// Raw protocol bounds: a larger frame or fetch is refused (the connection is
// closed), so a broken peer cannot make the server allocate without end.
const (
	MaxRawFrame = 64 << 20
	MaxRawFetch = 1 << 30
	rawReadSize = 256 << 10
)

// ErrRawMode is returned when a raw connection opens with an unknown mode.
var ErrRawMode = errors.New("bench: unknown raw mode")

// ErrRawTooLarge is returned for a frame or fetch over the raw bounds.
var ErrRawTooLarge = errors.New("bench: raw frame too large")

// RawServer serves the raw TCP baseline. Close ends it and its connections.
type RawServer struct {
	mu     sync.Mutex
	l      net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	data   []byte // what fetches are answered from, grown on demand
}

// NewRawServer returns a server that is not yet serving.
func NewRawServer() *RawServer {
	return &RawServer{conns: make(map[net.Conn]struct{})}
}

// Serve accepts connections on l until l is closed.
func (s *RawServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return net.ErrClosed
	}
	s.l = l
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			return fmt.Errorf("bench: raw accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return net.ErrClosed
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Close stops the listener and closes every connection.
func (s *RawServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.l != nil {
		s.l.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	return nil
}

func (s *RawServer) serveConn(c net.Conn) error {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	var mode [1]byte
	if _, err := io.ReadFull(c, mode[:]); err != nil {
		return fmt.Errorf("bench: raw mode: %w", err)
	}
	switch mode[0] {
	case RawModeEcho:
		return serveRawEcho(c)
	case RawModeFetch:
		return s.serveRawFetch(c)
	}
	return fmt.Errorf("bench: raw mode %q: %w", mode[0], ErrRawMode)
}

// serveRawEcho sends back every complete frame of each read in one write.
func serveRawEcho(c net.Conn) error {
	buf := make([]byte, rawReadSize)
	filled := 0
	for {
		n, err := c.Read(buf[filled:])
		if err != nil {
			return fmt.Errorf("bench: raw echo read: %w", err)
		}
		filled += n
		done, need := completeFrames(buf[:filled])
		if need > MaxRawFrame+4 {
			return fmt.Errorf("bench: raw echo frame of %d bytes: %w", need-4, ErrRawTooLarge)
		}
		if done > 0 {
			if _, err := c.Write(buf[:done]); err != nil {
				return fmt.Errorf("bench: raw echo write: %w", err)
			}
			filled = copy(buf, buf[done:filled])
		}
		if need > len(buf) {
			buf = append(buf[:filled], make([]byte, need-filled)...)
			buf = buf[:cap(buf)]
		}
	}
}

// completeFrames returns the length of the prefix of b made of whole frames
// and the size of the frame that follows it (0 when its length is unknown).
func completeFrames(b []byte) (done, need int) {
	for {
		rest := b[done:]
		if len(rest) < 4 {
			return done, 0
		}
		n := 4 + int(binary.LittleEndian.Uint32(rest))
		if len(rest) < n {
			return done, n
		}
		done += n
	}
}

func (s *RawServer) serveRawFetch(c net.Conn) error {
	var req [8]byte
	// Declared once: net.Buffers.WriteTo takes its receiver's address,
	// which would cost an allocation per answer for a variable of the loop.
	var bufs net.Buffers
	iov := make(net.Buffers, 0, 2)
	for {
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return fmt.Errorf("bench: raw fetch read: %w", err)
		}
		n := binary.LittleEndian.Uint64(req[:])
		if n > MaxRawFetch {
			return fmt.Errorf("bench: raw fetch of %d bytes: %w", n, ErrRawTooLarge)
		}
		bufs = append(iov[:0], req[:], s.fetchData(int(n)))
		if _, err := bufs.WriteTo(c); err != nil {
			return fmt.Errorf("bench: raw fetch write: %w", err)
		}
	}
}

// fetchData returns n bytes of the buffer fetches are answered from. The
// buffer is filled with a pattern: never-written memory maps the zero page,
// which the kernel copies from faster than from real memory.
func (s *RawServer) fetchData(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.data) < n {
		s.data = make([]byte, n)
		FillPattern(s.data)
	}
	return s.data[:n]
}

// FillPattern writes a non-zero byte pattern into b.
func FillPattern(b []byte) {
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
}

// RawEchoClient makes one echo at a time on its own connection (ping-pong).
// It reads through a buffer, so an answer usually takes one read.
type RawEchoClient struct {
	c    net.Conn
	br   *bufio.Reader
	wbuf []byte
	hdr  [4]byte
}

// DialRawEcho connects an echo client to the raw server at addr.
func DialRawEcho(addr string) (*RawEchoClient, error) {
	c, err := dialRaw(addr, RawModeEcho)
	if err != nil {
		return nil, err
	}
	return &RawEchoClient{c: c, br: bufio.NewReaderSize(c, rawReadSize)}, nil
}

func dialRaw(addr string, mode byte) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bench: raw dial %s: %w", addr, err)
	}
	if _, err := c.Write([]byte{mode}); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: raw dial %s: %w", addr, err)
	}
	return c, nil
}

// Echo sends req and reads its echo into resp, which must have len(req)
// bytes.
func (e *RawEchoClient) Echo(req, resp []byte) error {
	e.wbuf = binary.LittleEndian.AppendUint32(e.wbuf[:0], uint32(len(req)))
	e.wbuf = append(e.wbuf, req...)
	if _, err := e.c.Write(e.wbuf); err != nil {
		return fmt.Errorf("bench: raw echo write: %w", err)
	}
	if _, err := io.ReadFull(e.br, e.hdr[:]); err != nil {
		return fmt.Errorf("bench: raw echo read: %w", err)
	}
	if n := binary.LittleEndian.Uint32(e.hdr[:]); int(n) != len(resp) {
		return fmt.Errorf("bench: raw echo of %d bytes, want %d", n, len(resp))
	}
	if _, err := io.ReadFull(e.br, resp); err != nil {
		return fmt.Errorf("bench: raw echo read: %w", err)
	}
	return nil
}

// Close closes the connection.
func (e *RawEchoClient) Close() error { return e.c.Close() }

// RawFetchClient asks for blocks of bytes, one at a time.
type RawFetchClient struct {
	c   net.Conn
	req [8]byte
	hdr [8]byte
}

// DialRawFetch connects a fetch client to the raw server at addr.
func DialRawFetch(addr string) (*RawFetchClient, error) {
	c, err := dialRaw(addr, RawModeFetch)
	if err != nil {
		return nil, err
	}
	return &RawFetchClient{c: c}, nil
}

// Fetch asks for len(dst) bytes and reads them into dst.
func (f *RawFetchClient) Fetch(dst []byte) error {
	binary.LittleEndian.PutUint64(f.req[:], uint64(len(dst)))
	if _, err := f.c.Write(f.req[:]); err != nil {
		return fmt.Errorf("bench: raw fetch write: %w", err)
	}
	if _, err := io.ReadFull(f.c, f.hdr[:]); err != nil {
		return fmt.Errorf("bench: raw fetch read: %w", err)
	}
	if n := binary.LittleEndian.Uint64(f.hdr[:]); n != uint64(len(dst)) {
		return fmt.Errorf("bench: raw fetch answered %d bytes, want %d", n, len(dst))
	}
	if _, err := io.ReadFull(f.c, dst); err != nil {
		return fmt.Errorf("bench: raw fetch read: %w", err)
	}
	return nil
}

// Close closes the connection.
func (f *RawFetchClient) Close() error { return f.c.Close() }
