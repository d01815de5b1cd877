package afxdprpc_test

import "github.com/starwire/starwire/internal/afxdptest"

// The ticket the tests' packet sessions open under, and options holding it.
var testTicket = &afxdptest.Ticket
var withTicket = afxdptest.WithTicket
