package rpc

import (
	"crypto/tls"
	"time"

	"github.com/starwire/starwire/wire"
)

// StreamOptions are the settings of the TCP transport that rpc's tests vary.
type StreamOptions struct {
	Limits       wire.Limits
	StallTimeout time.Duration
	TLS          *tls.Config
}

// The TCP transport for rpc's own tests. rpc cannot import rpc/tcp, not
// even in its internal tests (rpc/tcp imports rpc: a cycle), so
// tcphook_test.go, an external test file of this package that may import
// both, sets these in its init, which runs before any test.
var (
	NewStream func(StreamOptions) Transport
)

// tcpTransport is a TCP transport with the defaults.
func tcpTransport() Transport { return NewStream(StreamOptions{}) }
