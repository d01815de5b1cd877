package stress_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/starwire/starwire/bench/stress"
	"github.com/starwire/starwire/rpc"
)

// maxCallsEnv, when set in a child's environment, is the server's
// MaxConcurrentCalls.
const maxCallsEnv = "STARWIRE_STRESS_MAX_CALLS"

// The test binary doubles as the stress server: a child started by
// startStressServer serves from here and never runs the tests.
func init() {
	stress.Child{Configure: func(s *rpc.Server) {
		if n, err := strconv.Atoi(os.Getenv(maxCallsEnv)); err == nil {
			s.MaxConcurrentCalls = n
		}
	}}.Main()
}

// startStressServer runs the stress server in a process of its own on a
// loopback port, ended at the end of the test; env is added to its
// environment.
func startStressServer(t *testing.T, env ...string) *stress.Proc {
	t.Helper()
	if raceOn {
		t.Skip("stress tests run in the pass without the race detector")
	}
	cmd, err := stress.Command("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, env...)
	p, err := stress.Start(cmd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.Exited() {
			return
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// dumpBoth writes every goroutine of this process and of the server to
// standard error (SIGQUIT ends the server), for a test that found calls hung.
func dumpBoth(t *testing.T, p *stress.Proc) {
	t.Helper()
	stress.DumpAll(os.Stderr, p, t.Name())
}
