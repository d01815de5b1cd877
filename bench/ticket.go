package bench

import (
	"os"

	"github.com/starwire/starwire/afxdp"
)

// TicketEnv names the variable that hands the benchmark's packet ticket to
// the servers it starts in other processes, which inherit it.
const TicketEnv = "STARWIRE_BENCH_PACKET_TICKET"

// PacketTicket is the ticket the benchmark's packet endpoints open their
// sessions under, as a real job's do (afxdp.Options.Ticket): the one this
// process inherited in TicketEnv, or a new one, which processes it starts
// inherit. It never leaves the benchmark's processes.
var PacketTicket = func() *afxdp.Ticket {
	if t, err := afxdp.ParseTicket(os.Getenv(TicketEnv)); err == nil {
		return &t
	}
	t := afxdp.NewTicket()
	os.Setenv(TicketEnv, t.String())
	return &t
}()
