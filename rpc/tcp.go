package rpc

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/starwire/starwire/wire"
)

// DefaultStallTimeout is how long a TCP connection waits for its peer to
// read anything of what is queued for it before failing.
const DefaultStallTimeout = 20 * time.Second

// TCP is the stream transport every peer can fall back to. Frames leave in
// vectored writes that batch many frames and point at tensors' own memory;
// they are read into buffers the receiver chooses.
type TCP struct {
	// Limits bound what the receive side accepts; zero means wire.DefaultLimits.
	Limits wire.Limits
	// Reactors flush connections' queued frames; nil means a group of
	// DefaultReactors shared by this transport's connections.
	Reactors *Reactors
	// StallTimeout fails a connection whose peer reads nothing for this
	// long while frames wait to be written; zero means DefaultStallTimeout,
	// negative never.
	StallTimeout time.Duration
	// TLS, when set, secures every connection with TLS 1.3 (older
	// versions are refused whatever the config says). A client's
	// ServerName defaults to the host it dials. See TLSFiles for mutual
	// TLS from certificate files that are reloaded when they change.
	TLS *tls.Config
}

// Name implements Transport.
func (t *TCP) Name() string { return "tcp" }

// Dial implements Transport.
func (t *TCP) Dial(ctx context.Context, addr string) (Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rpc: dial tcp %s: %w", addr, err)
	}
	return newTCPConn(ctx, nc.(*net.TCPConn), t, addr)
}

// Listen implements Transport.
func (t *TCP) Listen(addr string) (Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rpc: listen tcp %s: %w", addr, err)
	}
	return &tcpListener{l: l.(*net.TCPListener), t: t}, nil
}

func (t *TCP) reactors() *Reactors {
	if t.Reactors == nil {
		return sharedReactors()
	}
	return t.Reactors
}

// tlsConfig is t.TLS for one connection: TLS 1.3 only, and for a client
// the name of the host it dialed (dialed, as host:port) unless the config
// names one.
func (t *TCP) tlsConfig(dialed string) *tls.Config {
	cfg := t.TLS.Clone()
	cfg.MinVersion = tls.VersionTLS13
	if dialed != "" && cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(dialed); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg
}

func (t *TCP) stallTimeout() time.Duration {
	switch {
	case t.StallTimeout == 0:
		return DefaultStallTimeout
	case t.StallTimeout < 0:
		return 0
	}
	return t.StallTimeout
}

type tcpListener struct {
	l *net.TCPListener
	t *TCP
}

func (l *tcpListener) Accept() (Conn, error) {
	for {
		nc, err := l.l.AcceptTCP()
		if err != nil {
			return nil, err
		}
		// A connection that cannot be set up is the peer's loss alone.
		if c, err := newTCPConn(context.Background(), nc, l.t, ""); err == nil {
			return c, nil
		}
	}
}

func (l *tcpListener) Close() error   { return l.l.Close() }
func (l *tcpListener) Addr() net.Addr { return l.l.Addr() }
