package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/starwire/starwire/metrics"
)

// metricsFlag is --metrics_addr, which train and serve share.
type metricsFlag struct{ addr string }

func (f *metricsFlag) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "metrics_addr", "", `serve Prometheus metrics at http://ADDR/metrics ("host:port"; port 0 picks one); off when empty`)
}

// start serves the metrics when asked to, saying where, and returns them
// with a function that stops serving; nil metrics when off.
func (f *metricsFlag) start(cmd string, stdout io.Writer) (*metrics.Metrics, func(), error) {
	if f.addr == "" {
		return nil, func() {}, nil
	}
	m := metrics.New()
	srv, err := m.Serve(f.addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: --metrics_addr: %w", cmd, err)
	}
	fmt.Fprintf(stdout, "metrics at %s\n", srv.URL())
	return m, func() { srv.Close() }, nil
}
