package main

import (
	"context"
	"errors"
	"strings"
	"syscall"

	"github.com/starwire/starwire/rpc/cluster"
)

// joinHint says what likely went wrong when train's first calls to the
// tasks of a cluster it joined failed, or "". Their gRPC ports answered,
// so a starwire port refusing TCP connections means the tasks serve
// starwire over another transport, and packet calls that time out under
// --insecure_packet_path mean the tasks take sessions only under their
// ticket (they drop an OPEN without it, saying nothing to the dialer).
func (r *trainRun) joinHint(err error) string {
	if r.local != nil || !r.layout.Protocol.UsesStar() {
		return ""
	}
	switch {
	case r.f.transport == "tcp" && (errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")):
		return "\nthe tasks answer on their gRPC ports but refuse TCP on their starwire ports: " +
			"a cluster serving with --transport udp needs train --transport udp (and the cluster's --packet_ticket_file)"
	case r.f.transport == "udp" && r.f.Packet.Insecure && (errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded")):
		return "\nthe tasks answer on their gRPC ports but open no packet session without a ticket: " +
			"a cluster serving with --packet_ticket_file (or $" + cluster.EnvPacketTicketFile + ") needs train --packet_ticket_file with the same ticket, not --insecure_packet_path"
	}
	return ""
}
