package afxdprpc_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/starwire/starwire/internal/afxdptest"
	"github.com/starwire/starwire/internal/testwait"
)

// benchServerRole is the helper role (afxdptest.StartHelper) serving the
// transport benchmark's methods in a process of its own.
const benchServerRole = "rpc-server"

func TestMain(m *testing.M) {
	afxdptest.ServeHelper(benchServerRole, runBenchServer)
	// Every test stops what it started: endpoints, their reactors and
	// Receive loops, rpc clients and servers, helper processes. testwait
	// knows rpc's shared TCP write reactors, which live as long as the
	// process.
	testwait.VerifyTestMain(m)
}

// runBenchServer serves the benchmark's methods until its parent is done.
func runBenchServer(h afxdptest.Helper) (stop func(), err error) {
	kind, _, xo := benchKind(h.Kind)
	a, err := netip.ParseAddr(h.Addr)
	if err != nil {
		return nil, fmt.Errorf("bench server address: %w", err)
	}
	stop, _, err = startBenchServer(kind, h.Link, a, xo)
	return stop, err
}
