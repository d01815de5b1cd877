package capture

import "github.com/starwire/starwire/internal/afxdptest"

// The ticket the tests' packet sessions open under.
var testTicket = afxdptest.Ticket
