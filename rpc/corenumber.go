package rpc

import "github.com/starwire/starwire/internal/envvar"

// coreNumber is the size of the shared reactor group: SEASTAR_CORE_NUMBER
// when it is a whole number in 1..envvar.MaxCount, DefaultReactors
// otherwise. Commands check the variable and report bad values; rpc only
// reads it.
func coreNumber() int {
	if n, ok := envvar.Count(envvar.CoreNumber); ok {
		return n
	}
	return DefaultReactors
}
