package rpc

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/starwire/starwire/wire"
)

// ErrPlaintext is wrapped by the error of a TLS server's connection whose
// client spoke plaintext: most often a client started without the
// cluster's certificate files.
var ErrPlaintext = errors.New("rpc: a plaintext client on a port that requires TLS")

// PlaintextRefusal is what a server that requires TLS tells a plaintext
// client, in the client's own protocol, so that the client's error says
// why it was refused instead of "EOF" or "connection reset".
const PlaintextRefusal = "this server requires mutual TLS 1.3: start the client with the cluster's certificate, key and CA (--tls_dir or $STARWIRE_TLS_DIR)"

// plaintextLinger bounds how long a refused plaintext connection is kept
// to read the rest of the client's first frame and to let the refusal
// reach it before the socket closes.
const plaintextLinger = time.Second

// refusePlaintext answers a starwire client whose first frame came in the
// clear where a TLS handshake was due: its first call fails with
// Unauthenticated and PlaintextRefusal. err is the handshake's error; what
// is returned wraps ErrPlaintext when the client spoke starwire, and is err
// otherwise. The answer is written and the client's bytes drained within
// plaintextLinger, so that closing does not reset the connection before
// the client reads it.
func refusePlaintext(s *cipherShim, err error, r wire.Receiver) error {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || binary.LittleEndian.Uint16(rh.RecordHeader[:2]) != wire.Magic {
		return err
	}
	if w, ok := r.(PlaintextWatcher); ok {
		w.PlaintextRefused() // before the answer, which the client may act on at once
	}
	nc := s.Conn.(*net.TCPConn)
	nc.SetDeadline(time.Now().Add(plaintextLinger))
	if s.seen < len(s.first) {
		if _, err := io.ReadFull(nc, s.first[s.seen:]); err != nil {
			return fmt.Errorf("%w: %w", ErrPlaintext, err)
		}
	}
	if h, err := wire.ParseHeader(s.first[:], nil); err == nil && h.Kind == wire.KindRequest {
		answer := wire.Header{Kind: wire.KindError, CallID: h.CallID, Status: wire.Unauthenticated, MetaLen: uint32(len(PlaintextRefusal))}
		nc.Write(append(wire.AppendHeader(nil, &answer), PlaintextRefusal...))
	}
	nc.CloseWrite()
	io.Copy(io.Discard, io.LimitReader(nc, 16<<20))
	return fmt.Errorf("%w (%v)", ErrPlaintext, nc.RemoteAddr())
}

// PlaintextRefused implements PlaintextWatcher: it logs a plaintext client refused: the first, then at
// powers of two, so that a misconfigured fleet logs a few lines.
func (sc *serverConn) PlaintextRefused() {
	s, peer := sc.s, sc.peer
	s.mu.Lock()
	s.plaintext++
	n := s.plaintext
	s.mu.Unlock()
	if n&(n-1) == 0 {
		s.logger().Warn("rpc: tls: plaintext client refused", "peer", peer, "refused", n, "answer", PlaintextRefusal)
	}
}
