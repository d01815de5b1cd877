package flags

import (
	"flag"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc/cluster"
)

// RegisterAFXDPPath registers --afxdp_path: which of the calls that calls
// names take AF_XDP rather than TCP.
func RegisterAFXDPPath(fs *flag.FlagSet, p *string, calls string) {
	fs.StringVar(p, "afxdp_path", cluster.AFXDPPath(), `which `+calls+` take AF_XDP rather than TCP: "auto" (each call over the path measured faster for its size), "afxdp" (all), "tcp" (none), or a size such as 64KiB below which calls take it ("bypass" and "always" are aliases of "afxdp", "never" of "tcp"); $`+cluster.EnvAFXDPPath+` sets the default`)
}

// ParseAFXDPPath parses --afxdp_path for command cmd.
func ParseAFXDPPath(cmd, s string) (netpath.Policy, error) {
	p, err := netpath.ParsePolicy(s)
	if err != nil {
		return p, Usagef(`%s: --afxdp_path %q, want %s`, cmd, s, netpath.PolicyAccepts)
	}
	return p, nil
}
