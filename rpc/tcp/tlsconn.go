package tcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// tlsChunk is how much plaintext the writer encrypts before writing it out:
// small enough that a withdrawn request's unencrypted rest is most of it,
// large enough that records are full and writes few.
const tlsChunk = 256 << 10

// handshakeTimeout bounds a server's wait for a client's TLS handshake, so
// that a peer that connects and says nothing holds nothing for long.
const handshakeTimeout = 10 * time.Second

// A cipherShim sits under a tls.Conn: reads go to the socket, but writes,
// once the handshake is done, are kept as ciphertext for the connection's
// writer, which puts them on the socket without ever blocking (see
// conn). The tls.Conn thus only ever encrypts; it never waits on the
// peer while holding a caller's memory.
type cipherShim struct {
	net.Conn // the TCP socket

	mu       sync.Mutex
	buffered bool   // the handshake is done: keep writes
	out      []byte // ciphertext not yet written: out[off:]
	off      int
	stray    func() // called when the tls.Conn writes outside the writer
	inWriter atomic.Bool

	first [wire.HeaderSize]byte // the first bytes read, to answer a plaintext client
	seen  int
}

// Read reads from the socket, keeping the first bytes: the tls.Conn reads
// ahead, so that they are gone from the socket once it fails the handshake.
func (s *cipherShim) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if s.seen < len(s.first) {
		s.seen += copy(s.first[s.seen:], p[:n])
	}
	return n, err
}

func (s *cipherShim) Write(p []byte) (int, error) {
	s.mu.Lock()
	if !s.buffered {
		s.mu.Unlock()
		return s.Conn.Write(p)
	}
	s.out = append(s.out, p...)
	s.mu.Unlock()
	if !s.inWriter.Load() && s.stray != nil {
		// A post-handshake message the tls.Conn sent while reading.
		go s.stray()
	}
	return len(p), nil
}

// pending returns how many ciphertext bytes wait to be written.
func (s *cipherShim) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.out) - s.off
}

// writeTo writes waiting ciphertext to fd once, without blocking.
func (s *cipherShim) writeTo(fd uintptr) (n, full int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	full = len(s.out) - s.off
	if full == 0 {
		return 0, 0, nil
	}
	for {
		n, err = unix.Write(int(fd), s.out[s.off:])
		if err != unix.EINTR {
			break
		}
	}
	if n < 0 {
		n = 0
	}
	s.off += n
	if s.off == len(s.out) {
		s.out, s.off = s.out[:0], 0
	}
	return n, full, err
}

// startTLS wraps c's socket in TLS and runs the handshake: at once on the
// client side, bounded by ctx; on the server side, in Receive, so that
// accepting never waits on a peer.
func (c *conn) startTLS(ctx context.Context, cfg *tls.Config, client bool) error {
	c.shim = &cipherShim{Conn: c.nc, stray: c.kickWriter}
	if client {
		c.tls = tls.Client(c.shim, cfg)
		if err := c.tls.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("tcp: tls handshake with %v: %w", c.nc.RemoteAddr(), err)
		}
		c.handshakeDone()
		return nil
	}
	c.tls = tls.Server(c.shim, cfg)
	return nil
}

// serverHandshake completes a server connection's handshake; r, the
// connection's receiver, hears of a plaintext client (rpc.PlaintextWatcher).
func (c *conn) serverHandshake(r wire.Receiver) error {
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := c.tls.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("tcp: tls handshake with %v: %w", c.nc.RemoteAddr(), refusePlaintext(c.shim, err, r, c.hint))
	}
	c.handshakeDone()
	return nil
}

// handshakeDone switches the shim to keeping writes and lets the writer
// write what was queued meanwhile.
func (c *conn) handshakeDone() {
	c.shim.mu.Lock()
	c.shim.buffered = true
	c.shim.mu.Unlock()
	c.mu.Lock()
	c.secured = true
	c.mu.Unlock()
	c.kickWriter()
}

// kickWriter takes the write side if nobody holds it and writes.
func (c *conn) kickWriter() {
	c.mu.Lock()
	if c.writing || c.scheduled {
		c.mu.Unlock()
		return
	}
	c.writing = true
	c.mu.Unlock()
	c.writeNow()
}

// encryptSome feeds up to tlsChunk bytes of the batch's next parts, up to
// the first held one, to the tls.Conn, which leaves their ciphertext in the
// shim; it returns errHeld when the batch is blocked. Withdraw waits while
// it reads the parts, as it does for a writev.
func (c *conn) encryptSome() error {
	c.mu.Lock()
	c.out.skipDropped()
	if c.out.blocked() {
		c.mu.Unlock()
		return errHeld
	}
	chunk := c.tlsParts[:0]
	size := 0
	for i := c.out.next; i < len(c.out.parts) && size < tlsChunk && c.out.owner[i] != ownerHeld; i++ {
		p := c.out.parts[i]
		if len(p) == 0 {
			continue // a dropped message's
		}
		if size+len(p) > tlsChunk {
			p = p[:tlsChunk-size]
		}
		chunk = append(chunk, p)
		size += len(p)
	}
	c.inSyscall = true
	c.mu.Unlock()
	c.shim.inWriter.Store(true)
	var err error
	for _, p := range chunk {
		if _, err = c.tls.Write(p); err != nil {
			break
		}
	}
	c.shim.inWriter.Store(false)
	clear(chunk)
	c.tlsParts = chunk[:0]
	c.mu.Lock()
	c.inSyscall = false
	c.out.advance(size)
	if c.waiters > 0 {
		c.written.Broadcast()
	}
	c.mu.Unlock()
	return err
}

// writeTLSOnce is writeOnce for a TLS connection: it encrypts the next
// chunk when no ciphertext waits, then writes ciphertext once.
func (c *conn) writeTLSOnce(fd uintptr) (n, full int, err error) {
	if c.shim.pending() == 0 && c.out.pending() {
		switch err := c.encryptSome(); {
		case err == errHeld:
			return 0, 0, err
		case err != nil:
			return 0, 1, fmt.Errorf("tcp: encrypt for %v: %w", c.nc.RemoteAddr(), err)
		}
	}
	n, full, err = c.shim.writeTo(fd)
	c.bytesOut.Add(uint64(n))
	if err != nil && err != unix.EAGAIN {
		err = fmt.Errorf("tcp: write to %v: %w", c.nc.RemoteAddr(), err)
	}
	return n, full, err
}

// refusedAlerts are the TLS alerts by which a peer refuses this end's
// certificate (RFC 8446, 6.2): bad, unsupported, revoked, expired or
// unknown certificate, unknown CA, certificate required.
var refusedAlerts = map[uint64]bool{42: true, 43: true, 44: true, 45: true, 46: true, 48: true, 116: true}

// refusedByPeer marks err, a TLS client connection's read error, as refused for
// good (wire.Unauthenticated) when the peer sent an alert that refuses this
// end's certificate: a TLS 1.3 server checks a client's certificate after
// the client's handshake is done, so the client hears of it on its first
// read, and dialing again would be refused alike.
func refusedByPeer(c *conn, err error) error {
	var op *net.OpError
	if c.tls == nil || !c.dialer || !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return err
	}
	// crypto/tls reports a peer's alert as an OpError around a value of
	// its unexported alert type, a uint8.
	if v := reflect.ValueOf(op.Err); v.Kind() != reflect.Uint8 || !refusedAlerts[v.Uint()] {
		return err
	}
	return rpc.Errorf(wire.Unauthenticated, "tcp: tls: %v refused this end's certificate, see its log for why: %w", c.nc.RemoteAddr(), err)
}
