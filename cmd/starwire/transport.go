package main

import (
	"os"

	"github.com/starwire/starwire/cmd/starwire/internal/cluster"
	"github.com/starwire/starwire/rpc"
)

// transportChoice is the starwire transport a command uses, and why it is
// not AF_XDP when it is not.
type transportChoice struct {
	net      cluster.Net
	fallback string
}

// chooseTransport returns the transport named by --transport ("tcp" or
// "udp"). Neither is AF_XDP: the tasks of a cluster this command starts
// talk over loopback, and XDP only sees packets arriving on a NIC or veth,
// so fallback says why, in terms of this process.
func chooseTransport(name string) (transportChoice, error) {
	var c transportChoice
	switch name {
	case "tcp":
		c.net = cluster.TCPNet{}
	case "udp":
		c.net = cluster.UDPNet{}
	default:
		return c, usagef(`--transport %q, want "tcp" or "udp"`, name)
	}
	if os.Geteuid() != 0 {
		c.fallback = "AF_XDP needs root (CAP_NET_ADMIN and CAP_BPF)"
	} else {
		c.fallback = "the tasks talk over loopback, where XDP never sees their packets; AF_XDP needs each task on its own NIC or veth"
	}
	return c, nil
}

// transportName describes the transport for the summary line.
func transportName(p rpc.Protocol, t transportChoice) string {
	if !p.UsesStar() {
		return "gRPC over TCP (HTTP/2)"
	}
	return "starwire over " + t.net.Name() + " (fallback: " + t.fallback + ")"
}
