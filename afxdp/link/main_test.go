package link_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when goroutines outlive the tests: every
// link stops its watchers when it closes.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
