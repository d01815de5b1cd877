package rpc

import "github.com/starwire/starwire/internal/envvar"

// Environment variables, with the names TensorFlow and DeepRec users know.
const (
	EnvCoreNumber       = envvar.CoreNumber
	EnvPSCoreNumber     = envvar.PSCoreNumber
	EnvWorkerCoreNumber = envvar.WorkerCoreNumber
	EnvEndpointMapPath  = envvar.EndpointMapPath
	EnvTFConfig         = envvar.TFConfig
)

// CoreNumber returns the number of reactors: SEASTAR_CORE_NUMBER when it is
// a positive integer, DefaultReactors otherwise.
func CoreNumber() int {
	if n, ok := envvar.PositiveInt(EnvCoreNumber); ok {
		return n
	}
	return DefaultReactors
}

// RoleCoreNumber returns the reactor count for a task of job ("ps" or
// "worker") that talks to peers peers: DeepRec's NETWORK_PS_CORE_NUMBER or
// NETWORK_WORKER_CORE_NUMBER when set, else SEASTAR_CORE_NUMBER's value, and
// never more than the number of peers (a reactor without a connection only
// costs wake-ups).
func RoleCoreNumber(job string, peers int) int {
	n := CoreNumber()
	env := EnvWorkerCoreNumber
	if job == "ps" {
		env = EnvPSCoreNumber
	}
	if v, ok := envvar.PositiveInt(env); ok {
		n = v
	}
	if peers > 0 && n > peers {
		n = peers
	}
	return max(n, 1)
}

// EnvBool reads a "true"/"false" variable (any case, also 1/0), as DeepRec's
// *_ENABLE_POLLING and *_DISABLE_PIN_CORES; def when unset or unparsable.
func EnvBool(name string, def bool) bool { return envvar.Bool(name, def) }
