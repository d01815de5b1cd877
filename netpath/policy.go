package netpath

import (
	"fmt"
	"strings"

	"github.com/starwire/starwire/internal/units"
)

// A Policy says which calls of a dual connection (one with both a packet
// session, afxdp or udp, and TCP) take the packet session and which stay
// on TCP. The zero value is PolicyAuto.
type Policy struct {
	Mode PolicyMode
	// Threshold, for PolicyThreshold: calls whose larger side (request, or
	// the answer expected) is smaller take the packet session, the rest
	// TCP.
	Threshold int64
}

// PolicyMode is how a Policy chooses.
type PolicyMode uint8

const (
	// PolicyAuto measures both paths by size class from the calls
	// themselves and sends each call over the one faster for its size.
	PolicyAuto PolicyMode = iota
	// PolicyThreshold sends calls below Policy.Threshold over the packet
	// session and the rest over TCP.
	PolicyThreshold
	// PolicyAFXDP sends every call over the packet session once it is
	// open.
	PolicyAFXDP
	// PolicyTCP keeps every call on TCP.
	PolicyTCP
)

// PolicyAccepts says what ParsePolicy reads, as "want ..." ends an error.
const PolicyAccepts = "auto, afxdp, tcp, or a size such as 64KiB or 65536 (bypass and always are aliases of afxdp, never of tcp)"

// policyWords are the words ParsePolicy reads, each named in
// PolicyAccepts and in package afxdp's glossary (a test checks both).
var policyWords = map[string]PolicyMode{
	"auto":   PolicyAuto,
	"afxdp":  PolicyAFXDP,
	"bypass": PolicyAFXDP,
	"always": PolicyAFXDP,
	"tcp":    PolicyTCP,
	"never":  PolicyTCP,
}

// ParsePolicy reads a policy as users write it, in flags and in
// STARWIRE_AFXDP_PATH: "auto" or "" (PolicyAuto), "afxdp" (every call
// over the packet session), "tcp" (none), or a positive size ("64KiB",
// "1MiB", "65536", internal/units' grammar) below which calls take the
// packet session. "bypass" and "always", older names of "afxdp", and
// "never", of "tcp", are read as aliases. Words are read in any case,
// around any space. It is the one reader of the grammar.
func ParsePolicy(s string) (Policy, error) {
	w := strings.ToLower(strings.TrimSpace(s))
	if w == "" {
		return Policy{}, nil
	}
	if m, ok := policyWords[w]; ok {
		return Policy{Mode: m}, nil
	}
	n, err := units.ParseSize(s)
	if err != nil || n <= 0 {
		return Policy{}, fmt.Errorf("netpath: path policy %q: want %s", s, PolicyAccepts)
	}
	return Policy{Mode: PolicyThreshold, Threshold: n}, nil
}

// String writes the policy as summaries show it: "auto", "afxdp", "tcp",
// or "below 64KiB".
func (p Policy) String() string {
	switch p.Mode {
	case PolicyThreshold:
		return "below " + units.FormatSize(p.Threshold)
	case PolicyAFXDP:
		return "afxdp"
	case PolicyTCP:
		return "tcp"
	}
	return "auto"
}
