package flags

import (
	"net"
	"strings"
)

// CheckIface refuses an --afxdp_iface the user named that does not exist
// here (in this network namespace): a typo must not leave a task serving
// over TCP as if no interface had been given. An empty name passes.
func CheckIface(cmd, name string) error {
	if name == "" {
		return nil
	}
	if _, err := net.InterfaceByName(name); err == nil {
		return nil
	}
	var have []string
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			have = append(have, i.Name)
		}
	}
	return Usagef("%s: --afxdp_iface %q: no such interface here (have %s)", cmd, name, strings.Join(have, ", "))
}
