package flags

import (
	"os"

	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// Transport is the starwire transport a command uses, and why it is
// not AF_XDP when it is not.
type Transport struct {
	Net      tasks.Net
	Fallback string
}

// ChooseTransport returns the transport named by command cmd's --transport
// ("tcp" or "udp"), with the reason it is not AF_XDP left for the caller
// to set.
func ChooseTransport(cmd, name string) (Transport, error) {
	var c Transport
	switch name {
	case "tcp":
		c.Net = tasks.TCPNet{}
	case "udp":
		c.Net = tasks.UDPNet{}
	default:
		return c, Usagef(`%s: --transport %q, want "tcp" or "udp"`, cmd, name)
	}
	return c, nil
}

// Why a run is not on AF_XDP, by situation.
const (
	NoRoot       = "AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"
	OnLoopback   = "the tasks talk over loopback, where XDP never sees their packets; AF_XDP needs each task on its own NIC or veth (serve --afxdp_iface)"
	DriverOnTCP  = "the driver's calls are control traffic and stay on the stream transport; tasks started with serve --afxdp_iface carry their peer calls over AF_XDP"
	NoIfaceGiven = "no --afxdp_iface given"
)

// AFXDPFallback returns why, or "" when root could use AF_XDP and the
// caller's situation decides.
func AFXDPFallback(situation string) string {
	if os.Geteuid() != 0 {
		return NoRoot
	}
	return situation
}

// DriverPath says what carries the driver's calls to the tasks.
func DriverPath(p cluster.Protocol, t Transport) string {
	if !p.UsesStar() {
		return "gRPC"
	}
	return "starwire over " + t.Net.Name()
}
