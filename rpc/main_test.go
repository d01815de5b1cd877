package rpc

import (
	"testing"

	"github.com/starwire/starwire/internal/testwait"
)

// TestMain fails the package when goroutines outlive the tests: every
// connection, reader, writer, keepalive timer and handler must end when its
// client or server closes. The shared reactors live as long as the process
// and do not count (testwait knows them); goroutines still exiting get
// testwait.LeakSettle.
func TestMain(m *testing.M) {
	testwait.VerifyTestMain(m)
}
