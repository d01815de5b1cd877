package tcp

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// plaintextLinger bounds how long a refused plaintext connection is kept
// to read the rest of the client's first frame and to let the refusal
// reach it before the socket closes.
const plaintextLinger = time.Second

// refusePlaintext answers a starwire client whose first frame came in the
// clear where a TLS handshake was due: its first call fails with
// Unauthenticated and rpc.PlaintextAnswer(hint). err is the handshake's error; what
// is returned wraps rpc.ErrPlaintext when the client spoke starwire, and is err
// otherwise. The answer is written and the client's bytes drained within
// plaintextLinger, so that closing does not reset the connection before
// the client reads it.
func refusePlaintext(s *cipherShim, err error, r wire.Receiver, hint string) error {
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) || binary.LittleEndian.Uint16(rh.RecordHeader[:2]) != wire.Magic {
		return err
	}
	if w, ok := r.(rpc.PlaintextWatcher); ok {
		w.PlaintextRefused() // before the answer, which the client may act on at once
	}
	nc := s.Conn.(*net.TCPConn)
	nc.SetDeadline(time.Now().Add(plaintextLinger))
	if s.seen < len(s.first) {
		if _, err := io.ReadFull(nc, s.first[s.seen:]); err != nil {
			return fmt.Errorf("%w: %w", rpc.ErrPlaintext, err)
		}
	}
	if h, err := wire.ParseHeader(s.first[:], nil); err == nil && h.Kind == wire.KindRequest {
		msg := rpc.PlaintextAnswer(hint)
		answer := wire.Header{Kind: wire.KindError, CallID: h.CallID, Status: wire.Unauthenticated, MetaLen: uint32(len(msg))}
		nc.Write(append(wire.AppendHeader(nil, &answer), msg...))
	}
	nc.CloseWrite()
	io.Copy(io.Discard, io.LimitReader(nc, 16<<20))
	return fmt.Errorf("%w (%v)", rpc.ErrPlaintext, nc.RemoteAddr())
}
