// Package afxdptest holds the fixtures of the packet path's tests in
// several packages: the session ticket every process they start shares,
// helper processes serving in a network namespace (StartHelper,
// ServeHelper), and a link wrapper that drops, reorders and duplicates
// what it receives (Impair), where netem cannot reach. Only tests import
// it.
package afxdptest

import "github.com/starwire/starwire/afxdp"

// Ticket, the same in every process the tests start, is the ticket both
// ends of the tests' packet sessions hold.
var Ticket = afxdp.Ticket{ID: 0x7e57, Secret: [32]byte{'s', 't', 'a', 'r', 'w', 'i', 'r', 'e'}}

// WithTicket returns o holding Ticket.
func WithTicket(o afxdp.Options) afxdp.Options {
	o.Ticket = &Ticket
	return o
}
