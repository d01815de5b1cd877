package main

import (
	"cmp"
	"flag"
	"os"
	"strings"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/rpc/cluster"
)

// packetFlags say who may open sessions on a command's packet paths
// (--transport udp, --afxdp_iface): holders of the ticket in a file, as
// Kubernetes mounts a secret, which every task of the cluster holds; or,
// with --insecure_packet_path, anyone who can send to the port. Without
// either, the packet endpoints take sessions only from the same process.
type packetFlags struct {
	file     string
	insecure bool
}

func (p *packetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&p.file, "packet_ticket_file", "", "file holding the packet ticket every task of the cluster holds (80 hex digits: openssl rand -hex 40; a mounted secret): only its holders open packet sessions with this process (default $"+cluster.EnvPacketTicketFile+")")
	fs.BoolVar(&p.insecure, "insecure_packet_path", false, "let anyone who can send to the packet port open sessions, without a ticket")
}

// auth returns the authentication the flags and variable ask for.
func (p *packetFlags) auth(cmd string) (tasks.PacketAuth, error) {
	path := cmp.Or(p.file, cluster.PacketTicketFile())
	if path == "" {
		return tasks.PacketAuth{Insecure: p.insecure}, nil
	}
	if p.insecure {
		return tasks.PacketAuth{}, usagef("%s: --insecure_packet_path and a packet ticket (%s): give one", cmd, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return tasks.PacketAuth{}, usagef("%s: packet ticket: %v", cmd, err)
	}
	t, err := afxdp.ParseTicket(strings.TrimSpace(string(b)))
	if err != nil {
		return tasks.PacketAuth{}, usagef("%s: packet ticket %s: %v", cmd, path, err)
	}
	return tasks.PacketAuth{Ticket: &t}, nil
}

// secure gives a UDP starwire transport the authentication.
func (p *packetFlags) secure(c *transportChoice, a tasks.PacketAuth) {
	if u, ok := c.net.(tasks.UDPNet); ok {
		u.Auth = a
		c.net = u
	}
}
