package rpc

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when goroutines outlive the tests: every
// connection, reader, writer, keepalive timer and handler must end when its
// client or server closes. The shared reactors live as long as the process
// and do not count.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/starwire/starwire/rpc/tcp.(*reactor).run"),
	)
}
