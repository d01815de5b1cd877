// Package afxdptest holds what the packet path's tests in several packages
// share. Only tests import it.
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
