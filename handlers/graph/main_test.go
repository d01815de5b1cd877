package graph_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine they started (a
// step's receiver, a stepContext watcher, a server's connection) outlives
// them. rpc's shared reactors live as long as the process, by design.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/starwire/starwire/rpc/tcp.(*reactor).run"))
}
