package flags

import (
	"flag"

	"github.com/starwire/starwire/netpath"
	"github.com/starwire/starwire/rpc/cluster"
)

// RegisterAFXDPPath registers --afxdp_path: which of the calls that calls
// names take AF_XDP rather than TCP.
func RegisterAFXDPPath(fs *flag.FlagSet, p *string, calls string) {
	fs.StringVar(p, "afxdp_path", cluster.AFXDPPath(), `which `+calls+` take AF_XDP rather than TCP: "auto" (each call over the path measured faster for its size), "bypass" (all), "tcp" (none), or a size such as 64KiB below which calls take it; $`+cluster.EnvAFXDPPath+` sets the default`)
}

// ParseAFXDPPath parses --afxdp_path for command cmd.
func ParseAFXDPPath(cmd, s string) (netpath.Policy, error) {
	p, err := netpath.ParsePolicy(s)
	if err != nil {
		return p, Usagef(`%s: --afxdp_path %q, want "auto", "bypass", "tcp" or a size such as 64KiB`, cmd, s)
	}
	return p, nil
}
