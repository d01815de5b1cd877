package cluster

import (
	"github.com/starwire/starwire/internal/envvar"
	"github.com/starwire/starwire/rpc"
)

// CoreNumber returns the number of reactors: SEASTAR_CORE_NUMBER when it is
// a positive integer, rpc.DefaultReactors otherwise.
func CoreNumber() int {
	if n, ok := envvar.PositiveInt(envvar.CoreNumber); ok {
		return n
	}
	return rpc.DefaultReactors
}

// RoleCoreNumber returns the reactor count for a task of job ("ps" or
// "worker") that talks to peers peers: DeepRec's NETWORK_PS_CORE_NUMBER or
// NETWORK_WORKER_CORE_NUMBER when set, else SEASTAR_CORE_NUMBER's value, and
// never more than the number of peers (a reactor without a connection only
// costs wake-ups).
func RoleCoreNumber(job string, peers int) int {
	n := CoreNumber()
	env := envvar.WorkerCoreNumber
	if job == "ps" {
		env = envvar.PSCoreNumber
	}
	if v, ok := envvar.PositiveInt(env); ok {
		n = v
	}
	if peers > 0 && n > peers {
		n = peers
	}
	return max(n, 1)
}
