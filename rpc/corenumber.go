package rpc

import "sync/atomic"

// sharedSize is the size SetSharedReactors asked for, 0 for
// DefaultReactors.
var sharedSize atomic.Int32

// SetSharedReactors sets the size of the shared reactor group, which
// transports without Reactors of their own (a TCP{} with no Reactors) run
// on, to n when n > 0, DefaultReactors otherwise. It takes effect only
// before the group's first use, so a command calls it as it starts, with
// SEASTAR_CORE_NUMBER's count as rpc/cluster reads it (cluster.CoreNumber).
// rpc itself reads no environment variable.
func SetSharedReactors(n int) { sharedSize.Store(int32(max(n, 0))) }

// coreNumber is the size of the shared reactor group.
func coreNumber() int {
	if n := sharedSize.Load(); n > 0 {
		return int(n)
	}
	return DefaultReactors
}
