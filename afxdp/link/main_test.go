package link_test

import (
	"testing"

	"github.com/starwire/starwire/internal/testwait"
)

// TestMain fails the package when goroutines outlive the tests: every
// link stops its watchers when it closes.
func TestMain(m *testing.M) { testwait.VerifyTestMain(m) }
