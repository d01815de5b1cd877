package afxdprpc_test

import "github.com/starwire/starwire/afxdp"

// testTicket, the same in every process the tests start, is the ticket
// both ends of the tests' packet sessions hold.
var testTicket = &afxdp.Ticket{ID: 0x7e57, Secret: [32]byte{'s', 't', 'a', 'r', 'w', 'i', 'r', 'e'}}

// withTicket returns o holding testTicket.
func withTicket(o afxdp.Options) afxdp.Options {
	o.Ticket = testTicket
	return o
}
