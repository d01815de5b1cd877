package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrNetemUnsupported is wrapped by Netem when the kernel has no netem
// qdisc (CONFIG_NET_SCH_NETEM unset).
var ErrNetemUnsupported = errors.New("netem qdisc not available")

// Netem replaces the root qdisc of e's veth end with netem using the given
// parameters, for example Netem("loss", "5%", "reorder", "25%", "delay",
// "1ms") or Netem("duplicate", "2%"). It affects packets e's kernel stack
// sends. It does not affect AF_XDP transmissions, which bypass the qdisc
// layer (copy mode transmits with dev_direct_xmit), and on receive XDP runs
// before any qdisc; impair AF_XDP traffic in the XDP program instead.
func (e *End) Netem(params ...string) error {
	args := append([]string{"netns", "exec", e.NS, "tc", "qdisc", "replace", "dev", e.Link, "root", "netem"}, params...)
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "qdisc kind is unknown") {
			return fmt.Errorf("netns: netem on %s: %w", e.Link, ErrNetemUnsupported)
		}
		return fmt.Errorf("netns: netem %s on %s: %w: %s", strings.Join(params, " "), e.Link, err, out)
	}
	return nil
}

// ClearNetem removes a qdisc Netem installed.
func (e *End) ClearNetem() error {
	out, err := exec.Command("ip", "netns", "exec", e.NS, "tc", "qdisc", "del", "dev", e.Link, "root").CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: clear netem on %s: %w: %s", e.Link, err, out)
	}
	return nil
}
