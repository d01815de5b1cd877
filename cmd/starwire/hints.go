package main

import (
	"errors"
	"strings"
	"syscall"
)

// joinHint says what likely went wrong when train's first calls to the
// tasks of a cluster it joined failed, or "": their gRPC ports answered,
// so a starwire port refusing TCP connections means the tasks serve
// starwire over another transport.
func (r *trainRun) joinHint(err error) string {
	if r.local != nil || !r.layout.Protocol.UsesStar() || r.f.transport != "tcp" {
		return ""
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !strings.Contains(err.Error(), "connection refused") {
		return ""
	}
	return "\nthe tasks answer on their gRPC ports but refuse TCP on their starwire ports: " +
		"a cluster serving with --transport udp needs train --transport udp (and the cluster's --packet_ticket_file)"
}
