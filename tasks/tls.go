package tasks

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/starwire/starwire/rpc/tcp"
)

// tlsConfig returns the one config of both ends of a process's TCP paths,
// nil when f is nil (plaintext).
func tlsConfig(f *tcp.TLSFiles) (*tls.Config, error) {
	if f == nil {
		return nil, nil
	}
	cfg, err := f.Config()
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return cfg, nil
}

// plaintextHint is what a plaintext client refused by a server with f is
// told of where the certificate files go (f.Hint).
func plaintextHint(f *tcp.TLSFiles) string {
	if f == nil {
		return ""
	}
	return f.Hint
}

// grpcCreds returns gRPC's credentials for f, which serve and dial alike;
// gRPC adds the ALPN protocol "h2" it needs, to the configs
// GetConfigForClient returns too.
func grpcCreds(f *tcp.TLSFiles) (credentials.TransportCredentials, error) {
	cfg, err := tlsConfig(f)
	if cfg == nil {
		return nil, err
	}
	return confirmedCreds{credentials.NewTLS(cfg), f}, nil
}

// confirmedCreds are TLS credentials whose client handshake waits for the
// server's first bytes. In TLS 1.3 a client finishes its handshake before
// the server has checked the client's certificate, so a refusal arrives
// only on the first read; gRPC's server speaks first (its SETTINGS frame),
// and reading that first byte here makes a refusal the handshake's error,
// "tls: bad certificate", rather than a broken pipe on a later write.
//
// As a server they answer a plaintext gRPC client in HTTP/2, with a GOAWAY
// whose debug data says that TLS is required (see serverHandshake).
type confirmedCreds struct {
	credentials.TransportCredentials
	files *tcp.TLSFiles
}

func (c confirmedCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	}
	var first [1]byte
	n, err := conn.Read(first[:])
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("tls: %s refused the connection: %w", authority, err)
	}
	return peek(conn, first[:n]), info, nil
}

func (c confirmedCreds) Clone() credentials.TransportCredentials {
	return confirmedCreds{c.TransportCredentials.Clone(), c.files}
}

// peek returns c giving back first, the bytes read ahead, before reading
// on. It offers what c offers of syscall.Conn, through which gRPC reads
// socket options (channelz) and which gRPC's TLS credentials keep only
// when the raw conn they wrap offers it, and of CloseWrite, which touches
// no read-ahead. It drops io.ReaderFrom and io.WriterTo: WriterTo would
// read past first, and crypto/tls and gRPC, the only users of these
// conns, copy through Read and Write.
func peek(c net.Conn, first []byte) net.Conn {
	p := &peekedConn{Conn: c, first: first}
	sc, sys := c.(syscall.Conn)
	cw, half := c.(closeWriter)
	switch {
	case sys && half:
		return struct {
			*peekedConn
			syscall.Conn
			closeWriter
		}{p, sc, cw}
	case sys:
		return struct {
			*peekedConn
			syscall.Conn
		}{p, sc}
	case half:
		return struct {
			*peekedConn
			closeWriter
		}{p, cw}
	}
	return p
}

// A closeWriter half-closes a connection (*net.TCPConn, *tls.Conn).
type closeWriter interface{ CloseWrite() error }

// peekedConn gives back the bytes read ahead before reading on.
type peekedConn struct {
	net.Conn
	first []byte
}

func (p *peekedConn) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// GRPCDialOptions returns what a gRPC client of the layout's tasks dials
// with: TLS credentials when the layout has TLS, none otherwise.
func (l *Layout) GRPCDialOptions() ([]grpc.DialOption, error) {
	creds, err := grpcCreds(l.TLS)
	if creds == nil {
		return nil, err
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(creds)}, nil
}

// grpcServerOptions returns the options of a task's gRPC server for f.
func grpcServerOptions(f *tcp.TLSFiles) ([]grpc.ServerOption, error) {
	creds, err := grpcCreds(f)
	if creds == nil {
		return nil, err
	}
	return []grpc.ServerOption{grpc.Creds(creds)}, nil
}
