package tcp

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// DefaultStallTimeout is how long a TCP connection waits for its peer to
// read anything of what is queued for it before failing.
const DefaultStallTimeout = 20 * time.Second

// Transport is the stream transport every peer can fall back to, an
// rpc.Transport. Frames leave in vectored writes that batch many frames and
// point at tensors' own memory; they are read into buffers the receiver
// chooses. The zero value is usable.
type Transport struct {
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
	// PlaintextHint names, in the answer a plaintext client of a TLS
	// server gets (rpc.PlaintextAnswer), where the program takes its
	// certificate files from, such as its flags (TLSFiles.Hint).
	PlaintextHint string
}

// Name implements rpc.Transport.
func (t *Transport) Name() string { return "tcp" }

// Dial implements rpc.Transport.
func (t *Transport) Dial(ctx context.Context, addr string) (rpc.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: dial %s: %w", addr, err)
	}
	return newConn(ctx, nc.(*net.TCPConn), t, addr)
}

// Listen implements rpc.Transport.
func (t *Transport) Listen(addr string) (rpc.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("tcp: listen %s: %w", addr, err)
	}
	return &listener{l: l.(*net.TCPListener), t: t}, nil
}

func (t *Transport) reactors() *Reactors {
	if t.Reactors == nil {
		return sharedReactors()
	}
	return t.Reactors
}

// tlsConfig is t.TLS for one connection: TLS 1.3 only, and for a client
// the name of the host it dialed (dialed, as host:port) unless the config
// names one.
func (t *Transport) tlsConfig(dialed string) *tls.Config {
	cfg := t.TLS.Clone()
	cfg.MinVersion = tls.VersionTLS13
	if dialed != "" && cfg.ServerName == "" {
		if host, _, err := net.SplitHostPort(dialed); err == nil {
			cfg.ServerName = host
		}
	}
	return cfg
}

func (t *Transport) stallTimeout() time.Duration {
	switch {
	case t.StallTimeout == 0:
		return DefaultStallTimeout
	case t.StallTimeout < 0:
		return 0
	}
	return t.StallTimeout
}

type listener struct {
	l *net.TCPListener
	t *Transport
}

func (l *listener) Accept() (rpc.Conn, error) {
	for {
		nc, err := l.l.AcceptTCP()
		if err != nil {
			return nil, err
		}
		// A connection that cannot be set up is the peer's loss alone.
		if c, err := newConn(context.Background(), nc, l.t, ""); err == nil {
			return c, nil
		}
	}
}

func (l *listener) Close() error   { return l.l.Close() }
func (l *listener) Addr() net.Addr { return l.l.Addr() }
