package xdp

import "fmt"

// Counter indexes the program's per-CPU counters map.
type Counter uint32

// The program's counters. Every packet ends in exactly one of Redirected,
// Passed, Malformed, NotAllowed and Impaired; NoSocket additionally counts
// the starwire packets among Passed that had no socket on their queue.
const (
	// CounterRedirected counts packets handed to an AF_XDP socket.
	CounterRedirected Counter = iota
	// CounterPassed counts well-formed packets given to the kernel stack.
	CounterPassed
	// CounterNoSocket counts starwire-port packets passed because no
	// socket was registered for their RX queue.
	CounterNoSocket
	// CounterNotAllowed counts starwire-port packets dropped because their
	// source is not on the enabled allowlist.
	CounterNotAllowed
	// CounterMalformed counts packets too short for the headers they
	// announce (or IPv4 with a bad version or header length); they are
	// passed to the kernel, which drops them with its own accounting.
	CounterMalformed
	// CounterImpaired counts starwire-port packets dropped by injected loss.
	CounterImpaired
	numCounters
)

// Counters are the program's counters summed over CPUs.
type Counters struct {
	Redirected, Passed, NoSocket, NotAllowed, Malformed, Impaired uint64
}

// String names the counter.
func (c Counter) String() string {
	names := [...]string{"redirected", "passed", "no-socket", "not-allowed", "malformed", "impaired"}
	if int(c) < len(names) {
		return names[c]
	}
	return fmt.Sprintf("counter(%d)", uint32(c))
}
