package tasks

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/credentials"

	"github.com/starwire/starwire/rpc"
)

// recordHandshake is the first byte of every TLS client's first record.
const recordHandshake = 0x16

// ServerHandshake refuses a plaintext gRPC client in its own protocol:
// gRPC-Go then fails the call with the GOAWAY's debug data, which says what
// to do, rather than with "error reading server preface: EOF". A client
// that starts a TLS handshake goes on to it.
func (c confirmedCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	// gRPC's connection timeout, set on raw, bounds these reads too.
	first := make([]byte, len(http2.ClientPreface))
	n, err := raw.Read(first[:1])
	if err == nil && first[0] != recordHandshake {
		var m int
		m, err = io.ReadFull(raw, first[1:])
		n += m
		if err == nil && bytes.Equal(first, []byte(http2.ClientPreface)) {
			return nil, nil, c.refusePlaintext(raw)
		}
	}
	if err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("tls: reading the client's first bytes: %w", err)
	}
	return c.TransportCredentials.ServerHandshake(peek(raw, first[:n]))
}

// refusePlaintext answers a plaintext gRPC client's first call, in
// HTTP/2, with status Unauthenticated and rpc.PlaintextAnswer, then a
// GOAWAY, and lets the client read them before the connection closes; all
// within a second and a bounded number of frames.
func (c confirmedCreds) refusePlaintext(raw net.Conn) error {
	defer raw.Close()
	// Counted first: the client may act on the answer before the drain ends.
	err := fmt.Errorf("%w: a gRPC client (%v)", rpc.ErrPlaintext, raw.RemoteAddr())
	if c.files != nil {
		c.files.Refused(raw, err)
	}
	msg := rpc.PlaintextAnswer(plaintextHint(c.files))
	raw.SetDeadline(time.Now().Add(time.Second))
	fr := http2.NewFramer(raw, raw)
	fr.WriteSettings()
	for range 16 {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		if h, ok := f.(*http2.HeadersFrame); ok {
			writeRefusal(fr, h.StreamID, msg)
			break
		}
	}
	fr.WriteGoAway(0, http2.ErrCodeInadequateSecurity, []byte(msg))
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(raw, 1<<20))
	return err
}

// writeRefusal ends stream id with a trailers-only gRPC answer: status
// Unauthenticated (16) and the refusal, which is printable ASCII without
// '%' and so needs no percent-encoding in grpc-message.
func writeRefusal(fr *http2.Framer, id uint32, msg string) {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":status", "200"}, {"content-type", "application/grpc"}, {"grpc-status", "16"}, {"grpc-message", msg}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
}
