package flags

import (
	"flag"
	"fmt"
	"strings"
)

// AFXDP is the value of --afxdp, one flag of the same values in train,
// serve, cluster up and cluster manifests: whether the tasks carry their
// calls to each other over the afxdp path (AF_XDP).
//
//   - auto: where the machine allows it (root, an interface XDP sees),
//     otherwise over TCP, saying why;
//   - on: or fail, saying why;
//   - off: never.
//
// "true" and "false" (also 1 and 0, any case) are aliases of on and off,
// for the commands where --afxdp was a boolean. The zero value is auto.
type AFXDP uint8

// The modes of --afxdp.
const (
	AFXDPAuto AFXDP = iota
	AFXDPOn
	AFXDPOff
)

// afxdpAccepts says what Set reads.
const afxdpAccepts = `want "auto", "on" or "off" ("true" and "false" are aliases of "on" and "off")`

// RegisterAFXDP registers --afxdp on fs, p starting as def; usage says
// what on means for the command.
func RegisterAFXDP(fs *flag.FlagSet, p *AFXDP, def AFXDP, usage string) {
	*p = def
	usage += `, as the ` + "`mode`" + ` says: "auto" where the machine allows it, "on" or fail, "off" never ("true" and "false" are aliases of "on" and "off")`
	if def == AFXDPAuto {
		usage += " (default auto)" // flag shows no default equal to the zero value
	}
	fs.Var(p, "afxdp", usage)
}

// String implements flag.Value.
func (a AFXDP) String() string {
	switch a {
	case AFXDPOn:
		return "on"
	case AFXDPOff:
		return "off"
	}
	return "auto"
}

// Set implements flag.Value.
func (a *AFXDP) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		*a = AFXDPAuto
	case "on", "true", "1":
		*a = AFXDPOn
	case "off", "false", "0":
		*a = AFXDPOff
	default:
		return fmt.Errorf("--afxdp %q: %s", s, afxdpAccepts)
	}
	return nil
}
