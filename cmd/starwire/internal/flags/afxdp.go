package flags

import (
	"flag"
	"fmt"
	"strconv"
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
// The modes are read in any case. "true" and "false", and every other
// spelling the commands' boolean flags take (strconv.ParseBool's: 1, t,
// TRUE, True; 0, f, FALSE, False), are aliases of on and off, as --afxdp
// was a boolean flag. The zero value is auto.
type AFXDP uint8

// The modes of --afxdp.
const (
	AFXDPAuto AFXDP = iota
	AFXDPOn
	AFXDPOff
)

// afxdpAccepts says what Set reads.
const afxdpAccepts = `want "auto", "on" or "off" (` + afxdpAliases + `)`

// afxdpAliases says what else Set reads, in the help and its errors.
const afxdpAliases = `"true" and "false", or 1 and 0, t and f, as a boolean flag takes them, are aliases of "on" and "off"`

// RegisterAFXDP registers --afxdp on fs, p starting as def; usage says
// what on means for the command.
func RegisterAFXDP(fs *flag.FlagSet, p *AFXDP, def AFXDP, usage string) {
	*p = def
	usage += `, as the ` + "`mode`" + ` says: "auto" where the machine allows it, "on" or fail, "off" never (` + afxdpAliases + `)`
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
		return nil
	case "on":
		*a = AFXDPOn
		return nil
	case "off":
		*a = AFXDPOff
		return nil
	}
	on, err := strconv.ParseBool(s)
	switch {
	case err != nil:
		return fmt.Errorf("--afxdp %q: %s", s, afxdpAccepts)
	case on:
		*a = AFXDPOn
	default:
		*a = AFXDPOff
	}
	return nil
}
