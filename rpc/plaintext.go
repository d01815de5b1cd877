package rpc

import (
	"errors"
	"strings"
)

// ErrPlaintext is wrapped by the error of a TLS server's connection whose
// client spoke plaintext: most often a client started without the
// cluster's certificate files.
var ErrPlaintext = errors.New("rpc: a plaintext client on a port that requires TLS")

// PlaintextRefusal is what a server that requires TLS tells a plaintext
// client, in the client's own protocol, so that the client's error says
// why it was refused instead of "EOF" or "connection reset". A program
// adds where its clients take the files from (PlaintextAnswer).
const PlaintextRefusal = "this server requires mutual TLS 1.3: start the client with the cluster's certificate, key and CA"

// PlaintextAnswer is PlaintextRefusal with hint, a program's own words for
// where a client's certificate files go (its flags, its variables), in
// parentheses after it; an empty hint adds nothing.
func PlaintextAnswer(hint string) string {
	if hint = strings.TrimSpace(hint); hint == "" {
		return PlaintextRefusal
	}
	return PlaintextRefusal + " (" + hint + ")"
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
