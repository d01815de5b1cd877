package rpc_test

import (
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
)

// init gives rpc's internal tests their transport (see export_test.go).
func init() {
	rpc.NewStream = func(o rpc.StreamOptions) rpc.Transport {
		return &tcp.Transport{Limits: o.Limits, StallTimeout: o.StallTimeout, TLS: o.TLS}
	}
}
