package cluster

import (
	"fmt"
	"os"
	"strings"

	"github.com/starwire/starwire/internal/envvar"
	"github.com/starwire/starwire/rpc"
)

// A ReactorCount is how many reactors a TCP transport runs and where the
// number came from, for the line a process prints as it starts.
type ReactorCount struct {
	N int
	// Var names the variable that set it, "" for rpc.DefaultReactors, and
	// Value is the variable's value.
	Var, Value string
	// CappedAt is the connection count N was lowered to, 0 when the
	// setting was used as given.
	CappedAt int
}

// CoreNumber returns the number of reactors of a process's shared TCP
// transport: SEASTAR_CORE_NUMBER when it is a whole number in
// 1..envvar.MaxCount, rpc.DefaultReactors otherwise.
func CoreNumber() int { return coreNumber().N }

func coreNumber() ReactorCount {
	if n, ok := envvar.Count(envvar.CoreNumber); ok {
		return ReactorCount{N: n, Var: envvar.CoreNumber, Value: strings.TrimSpace(os.Getenv(envvar.CoreNumber))}
	}
	return ReactorCount{N: rpc.DefaultReactors}
}

// Reactors returns the reactor count of a task of job ("ps", or any other
// job for a worker, "chief" included, as in DeepRec) whose transport has
// conns connections: DeepRec's NETWORK_PS_CORE_NUMBER or
// NETWORK_WORKER_CORE_NUMBER when set, else SEASTAR_CORE_NUMBER's count,
// and, as DeepRec does, never more than conns when conns > 0 (a reactor
// without a connection only costs wake-ups).
func Reactors(job string, conns int) ReactorCount {
	r := coreNumber()
	name := envvar.WorkerCoreNumber
	if job == "ps" {
		name = envvar.PSCoreNumber
	}
	if n, ok := envvar.Count(name); ok {
		r = ReactorCount{N: n, Var: name, Value: strings.TrimSpace(os.Getenv(name))}
	}
	if conns > 0 && r.N > conns {
		r.N, r.CappedAt = conns, conns
	}
	return r
}

// RoleCoreNumber returns Reactors(job, conns).N.
func RoleCoreNumber(job string, conns int) int { return Reactors(job, conns).N }

// String describes the count: "4 (default)", "2 (NETWORK_PS_CORE_NUMBER=2)",
// "3 (NETWORK_PS_CORE_NUMBER=16, capped at 3 connections)".
func (r ReactorCount) String() string {
	from := "default"
	if r.Var != "" {
		from = r.Var + "=" + r.Value
	}
	if r.CappedAt > 0 {
		return fmt.Sprintf("%d (%s, capped at %d connections)", r.N, from, r.CappedAt)
	}
	return fmt.Sprintf("%d (%s)", r.N, from)
}

// Warning is the one line a count lowered from what a variable asked for
// deserves, "" when there is nothing to warn about.
func (r ReactorCount) Warning() string {
	if r.Var == "" || r.CappedAt == 0 {
		return ""
	}
	return fmt.Sprintf("%s=%s is more than the task's %d connections; using %d reactors", r.Var, r.Value, r.CappedAt, r.N)
}

// SharedReactors is the reactor count of a process's shared TCP transport
// (rpc.TCP without Reactors of its own), and where it came from.
func SharedReactors() ReactorCount { return coreNumber() }
