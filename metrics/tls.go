package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A TLSRefusals counts the clients a TLS server refused: *tcp.TLSFiles.
type TLSRefusals interface {
	Refusals() uint64
}

type tlsCollector struct {
	mu    sync.Mutex
	srcs  []TLSRefusals
	added bool
}

var tlsRefusedDesc = prometheus.NewDesc("starwire_tls_refused_total",
	"Clients refused by mutual TLS on the gRPC and starwire TCP ports: a certificate of another CA, or none.", nil, nil)

// AddTLS exports the refusals counted by src in starwire_tls_refused_total
// (summed over every src added; one added twice counts once).
func (m *Metrics) AddTLS(src TLSRefusals) {
	c := &m.tls
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.srcs {
		if s == src {
			return
		}
	}
	c.srcs = append(c.srcs, src)
	if !c.added {
		c.added = true
		m.reg.MustRegister(c)
	}
}

// Describe implements prometheus.Collector.
func (c *tlsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tlsRefusedDesc }

// Collect implements prometheus.Collector.
func (c *tlsCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	var n uint64
	for _, s := range c.srcs {
		n += s.Refusals()
	}
	c.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(tlsRefusedDesc, prometheus.CounterValue, float64(n))
}
