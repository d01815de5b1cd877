package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics holds starwire's metrics in one registry.
type Metrics struct {
	reg            *prometheus.Registry
	client, server *side
	packets        *packetCollector
	tls            tlsCollector
}

// New returns Metrics registered in a registry of their own, which also
// holds the Go runtime's and the process's collectors.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), client: newSide("client"), server: newSide("server"), packets: newPacketCollector()}
	m.reg.MustRegister(m.client.collectors()...)
	m.reg.MustRegister(m.server.collectors()...)
	m.reg.MustRegister(m.packets)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry, to add collectors of one's own or to
// gather.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }
