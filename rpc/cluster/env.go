package cluster

import (
	"fmt"
	"strings"

	"github.com/starwire/starwire/rpc/tcp"
)

// A ReactorCount is how many reactors a TCP transport runs and where the
// number came from, for the line a process prints as it starts.
type ReactorCount struct {
	N int
	// Var names the variable that set it, "" for tcp.DefaultReactors, and
	// Value is the variable's value.
	Var, Value string
	// CappedAt is the connection count N was lowered to, 0 when the
	// setting was used as given.
	CappedAt int
}

// CoreNumber returns the number of reactors of a process's shared TCP
// transport: SEASTAR_CORE_NUMBER when it is a whole number in
// 1..MaxReactors, tcp.DefaultReactors otherwise. A command hands it to
// tcp.SetSharedReactors.
func CoreNumber() int { return coreNumber().N }

// coreNumber is the one reading of SEASTAR_CORE_NUMBER; every count
// derived from it (CoreNumber, SharedReactors, Reactors, PacketReactors)
// comes from here.
func coreNumber() ReactorCount {
	return roleCount(EnvCoreNumber, ReactorCount{N: tcp.DefaultReactors})
}

// roleCount is the count variable name sets, or def when it is unset or
// not a count.
func roleCount(name string, def ReactorCount) ReactorCount {
	if n, ok := envCount(name); ok {
		return ReactorCount{N: n, Var: name, Value: strings.TrimSpace(getenv(name))}
	}
	return def
}

// PacketReactors returns how many AF_XDP reactors a process runs per
// interface, for afxdp.Options.Reactors: SEASTAR_CORE_NUMBER when set,
// else 0, afxdp's default of one.
func PacketReactors() int {
	if r := coreNumber(); r.Var != "" {
		return r.N
	}
	return 0
}

// Reactors returns the reactor count of a task of job ("ps", or any other
// job for a worker, "chief" included, as in DeepRec) whose transport has
// conns connections: DeepRec's NETWORK_PS_CORE_NUMBER or
// NETWORK_WORKER_CORE_NUMBER when set, else SEASTAR_CORE_NUMBER's count,
// and, as DeepRec does, never more than conns when conns > 0 (a reactor
// without a connection only costs wake-ups).
func Reactors(job string, conns int) ReactorCount {
	name := EnvWorkerCoreNumber
	if job == "ps" {
		name = EnvPSCoreNumber
	}
	r := roleCount(name, coreNumber())
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
// (tcp.Transport without Reactors of its own), and where it came from.
func SharedReactors() ReactorCount { return coreNumber() }
