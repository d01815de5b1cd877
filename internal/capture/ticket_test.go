package capture

import "github.com/starwire/starwire/afxdp/afxdptest"

// The ticket the tests' packet sessions open under.
var testTicket = afxdptest.Ticket
