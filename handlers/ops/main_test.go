package ops_test

import (
	"testing"

	"github.com/starwire/starwire/internal/testwait"
)

// TestMain fails the package's tests when any goroutine they started (a
// step's receiver, a stepContext watcher, a server's connection) outlives
// them; testwait knows rpc's shared reactors, which live as long as the
// process by design.
func TestMain(m *testing.M) { testwait.VerifyTestMain(m) }
