package main

import (
	"os"

	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/rpc/cluster"
)

// transportChoice is the starwire transport a command uses, and why it is
// not AF_XDP when it is not.
type transportChoice struct {
	net      tasks.Net
	fallback string
}

// chooseTransport returns the transport named by command cmd's --transport
// ("tcp" or "udp"), with the reason it is not AF_XDP left for the caller
// to set.
func chooseTransport(cmd, name string) (transportChoice, error) {
	var c transportChoice
	switch name {
	case "tcp":
		c.net = tasks.TCPNet{}
	case "udp":
		c.net = tasks.UDPNet{}
	default:
		return c, usagef(`%s: --transport %q, want "tcp" or "udp"`, cmd, name)
	}
	return c, nil
}

// Why a run is not on AF_XDP, by situation.
const (
	noRoot       = "AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"
	onLoopback   = "the tasks talk over loopback, where XDP never sees their packets; AF_XDP needs each task on its own NIC or veth (serve --afxdp_iface)"
	driverOnTCP  = "the driver's calls are control traffic and stay on the stream transport; tasks started with serve --afxdp_iface carry their peer calls over AF_XDP"
	noIfaceGiven = "no --afxdp_iface given"
)

// afxdpFallback returns why, or "" when root could use AF_XDP and the
// caller's situation decides.
func afxdpFallback(situation string) string {
	if os.Geteuid() != 0 {
		return noRoot
	}
	return situation
}

// driverPath says what carries the driver's calls to the tasks.
func driverPath(p cluster.Protocol, t transportChoice) string {
	if !p.UsesStar() {
		return "gRPC"
	}
	return "starwire over " + t.net.Name()
}
