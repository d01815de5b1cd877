package tasks

import "github.com/starwire/starwire/afxdp"

// PacketAuth says whom a task's packet endpoints (UDPNet, ServeAFXDP, the
// local fabrics) let open sessions, as afxdp.Options.Ticket and
// InsecureNoAuth do. The zero value holds this process's own ticket, a
// random one that never leaves it: the tasks of one process talk to each
// other, and nothing outside can open a session with them. Tasks in
// several processes (serve) must share a Ticket, or run Insecure.
type PacketAuth struct {
	Ticket   *afxdp.Ticket
	Insecure bool
}

// processTicket is the ticket of the zero PacketAuth.
var processTicket = afxdp.NewTicket()

// options returns o with a's authentication.
func (a PacketAuth) options(o afxdp.Options) afxdp.Options {
	switch {
	case a.Ticket != nil:
		o.Ticket = a.Ticket
	case a.Insecure:
		o.InsecureNoAuth = true
	default:
		t := processTicket
		o.Ticket = &t
	}
	return o
}

// Shared reports whether a lets tasks of other processes open sessions.
func (a PacketAuth) Shared() bool { return a.Ticket != nil || a.Insecure }

// String says, for a status line, how packet sessions are opened.
func (a PacketAuth) String() string {
	switch {
	case a.Ticket != nil:
		return "packet sessions opened under the shared ticket"
	case a.Insecure:
		return "packet sessions opened by anyone (--insecure_packet_path)"
	default:
		return "packet sessions opened only within this process"
	}
}
