// Package netnstest gates tests on what package netns needs of the
// machine: Require skips a test (or fails it, where CI asks) unless
// network namespaces, veth pairs and AF_XDP sockets can be made here, and
// NewForTest makes a Pair that the test's end removes. Only tests import
// it, so that the product does not link package testing.
package netnstest

import (
	"os"
	"testing"

	"github.com/starwire/starwire/internal/netns"
)

// RequireEnv names the variable that turns Require's skips into failures.
const RequireEnv = "STARWIRE_REQUIRE_AFXDP"

// RequireNetemEnv does the same for the Netem feature, which kernels built
// without CONFIG_NET_SCH_NETEM lack even where AF_XDP works.
const RequireNetemEnv = "STARWIRE_REQUIRE_NETEM"

// Feature is an optional capability a test asks Require for, beyond the
// namespaces, veth pairs and AF_XDP sockets every caller needs.
type Feature int

const (
	// Netem is the netem qdisc, used by netns.End.Netem.
	Netem Feature = iota + 1
)

// Require skips t unless this machine can create network namespaces, veth
// pairs and AF_XDP sockets (netns.Probe), plus any features listed. When
// STARWIRE_REQUIRE_AFXDP=1 a missing capability fails t instead, so CI
// cannot pass by skipping; a missing Netem fails t only under
// STARWIRE_REQUIRE_NETEM=1.
func Require(t testing.TB, features ...Feature) {
	t.Helper()
	if err := netns.Probe(); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("kernel-bypass test needs netns, veth and AF_XDP (%s=1): %v", RequireEnv, err)
		}
		t.Skipf("kernel-bypass test skipped, machine lacks netns/veth/AF_XDP: %v", err)
	}
	for _, f := range features {
		if f != Netem {
			t.Fatalf("netnstest: unknown feature %d", f)
		}
		err := netns.ProbeNetem()
		if err == nil {
			continue
		}
		if os.Getenv(RequireNetemEnv) == "1" {
			t.Fatalf("test needs netem (%s=1): %v", RequireNetemEnv, err)
		}
		t.Skipf("test skipped, kernel lacks netem: %v", err)
	}
}

// NewForTest is Require, netns.New and t.Cleanup(Close) in one call.
func NewForTest(t testing.TB, opts netns.Options) *netns.Pair {
	t.Helper()
	Require(t)
	p, err := netns.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}
