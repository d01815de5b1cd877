package flags

import (
	"flag"
	"fmt"
	"io"

	"github.com/starwire/starwire/metrics"
)

// Metrics is --metrics_addr, which train and serve share.
type Metrics struct{ Addr string }

// Register adds the flags to fs.
func (f *Metrics) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.Addr, "metrics_addr", "", `serve Prometheus metrics at http://ADDR/metrics ("host:port"; port 0 picks one); off when empty`)
}

// Start serves the metrics when asked to, saying where, and returns them
// with a function that stops serving; nil metrics when off.
func (f *Metrics) Start(cmd string, stdout io.Writer) (*metrics.Metrics, func(), error) {
	if f.Addr == "" {
		return nil, func() {}, nil
	}
	m := metrics.New()
	srv, err := m.Serve(f.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: --metrics_addr: %w", cmd, err)
	}
	fmt.Fprintf(stdout, "metrics at %s\n", srv.URL())
	return m, func() { srv.Close() }, nil
}
