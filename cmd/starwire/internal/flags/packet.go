package flags

import (
	"cmp"
	"flag"
	"os"
	"strings"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// Packet says who may open sessions on a command's packet paths
// (--transport udp, --afxdp_iface): holders of the ticket in a file, as
// Kubernetes mounts a secret, which every task of the cluster holds; or,
// with --insecure_packet_path, anyone who can send to the port. Without
// either, the packet endpoints take sessions only from the same process.
type Packet struct {
	File     string
	Insecure bool
}

// Register adds the flags to fs.
func (p *Packet) Register(fs *flag.FlagSet) {
	fs.StringVar(&p.File, "packet_ticket_file", "", "file holding the packet ticket every task of the cluster holds (80 hex digits: openssl rand -hex 40; a mounted secret): only its holders open packet sessions with this process (default $"+cluster.EnvPacketTicketFile+")")
	fs.BoolVar(&p.Insecure, "insecure_packet_path", false, "let anyone who can send to the packet port open sessions, without a ticket")
}

// Auth returns the authentication the flags and variable ask for.
func (p *Packet) Auth(cmd string) (tasks.PacketAuth, error) {
	path := cmp.Or(p.File, cluster.PacketTicketFile())
	if path == "" {
		return tasks.PacketAuth{Insecure: p.Insecure}, nil
	}
	if p.Insecure {
		return tasks.PacketAuth{}, Usagef("%s: --insecure_packet_path and a packet ticket (%s): give one", cmd, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return tasks.PacketAuth{}, Usagef("%s: packet ticket: %v", cmd, err)
	}
	t, err := afxdp.ParseTicket(strings.TrimSpace(string(b)))
	if err != nil {
		return tasks.PacketAuth{}, Usagef("%s: packet ticket %s: %v", cmd, path, err)
	}
	return tasks.PacketAuth{Ticket: &t}, nil
}

// Secure gives a UDP starwire transport the authentication.
func (p *Packet) Secure(c *Transport, a tasks.PacketAuth) {
	if u, ok := c.Net.(tasks.UDPNet); ok {
		u.Auth = a
		c.Net = u
	}
}
