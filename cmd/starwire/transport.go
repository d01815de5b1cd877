package main

import (
	"github.com/starwire/starwire/rpc"
)

// transportChoice is the starwire transport a command uses, and why it fell
// back to TCP when it did.
type transportChoice struct {
	transport rpc.Transport // nil means TCP
	name      string
	fallback  string
}

// chooseTransport picks AF_XDP when this process can use it, else TCP with
// the reason.
func chooseTransport() transportChoice {
	return transportChoice{name: "TCP", fallback: afxdpUnavailable()}
}

// transportName describes the transport for the summary line.
func transportName(p rpc.Protocol, t transportChoice) string {
	if !p.UsesStar() {
		return "gRPC over TCP (HTTP/2)"
	}
	if t.fallback != "" {
		return "starwire over " + t.name + " (fallback: " + t.fallback + ")"
	}
	return "starwire over " + t.name
}
