package main

import (
	"flag"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/rpc/cluster"
)

// registerAFXDPPath registers --afxdp_path: which of the calls that calls
// names take AF_XDP rather than TCP.
func registerAFXDPPath(fs *flag.FlagSet, p *string, calls string) {
	fs.StringVar(p, "afxdp_path", cluster.AFXDPPath(), `which `+calls+` take AF_XDP rather than TCP: "auto" (each call over the path measured faster for its size), "bypass" (all), "tcp" (none), or a size such as 64KiB below which calls take it; $`+cluster.EnvAFXDPPath+` sets the default`)
}

// parseAFXDPPath parses --afxdp_path for command cmd.
func parseAFXDPPath(cmd, s string) (afxdprpc.PathPolicy, error) {
	p, err := afxdprpc.ParsePathPolicy(s)
	if err != nil {
		return p, usagef(`%s: --afxdp_path %q, want "auto", "bypass", "tcp" or a size such as 64KiB`, cmd, s)
	}
	return p, nil
}
