package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/rpc"
)

// A Local is a whole cluster in this process, every task on loopback ports
// the kernel picked, each with peers of its own as separate processes
// would have.
type Local struct {
	Layout Layout
	// EndpointMapPath is the endpoint map file written for the launch.
	EndpointMapPath string
	Servers         []*Server
}

// StartLocal starts ps parameter servers and workers worker tasks over
// protocol, writing the endpoint map into dir.
func StartLocal(ps, workers int, protocol rpc.Protocol, n Net, dir string, logger *slog.Logger) (l *Local, err error) {
	l = &Local{}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	jobs := map[string][]string{}
	em := rpc.NewEndpointMap(filepath.Join(dir, rpc.DefaultEndpointMapFile))
	for _, job := range []struct {
		name string
		n    int
	}{{"ps", ps}, {"worker", workers}} {
		for i := range job.n {
			s, err := Listen(job.name, i, "127.0.0.1:0", "127.0.0.1:0", protocol.UsesStar(), n)
			if err != nil {
				return nil, err
			}
			l.Servers = append(l.Servers, s)
			jobs[job.name] = append(jobs[job.name], s.GRPCAddr)
			if protocol.UsesStar() {
				if err := em.Add(s.GRPCAddr, s.StarAddr); err != nil {
					return nil, err
				}
			}
		}
	}
	spec, err := rpc.NewClusterSpec(jobs)
	if err != nil {
		return nil, err
	}
	if protocol.UsesStar() {
		// Written and read back, as tasks launched separately would read it.
		l.EndpointMapPath = filepath.Join(dir, rpc.DefaultEndpointMapFile)
		if err := writeEndpointMap(l.EndpointMapPath, em); err != nil {
			return nil, err
		}
		if em, err = rpc.ReadEndpointMap(l.EndpointMapPath); err != nil {
			return nil, err
		}
	}
	l.Layout = Layout{Protocol: protocol, Cluster: spec, Endpoints: em}
	if err := l.Layout.Check(); err != nil {
		return nil, err
	}
	for _, s := range l.Servers {
		if err := s.Start(l.Layout, logger); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// PeerStats sums the calls the tasks made to each other.
func (l *Local) PeerStats() (calls, bytes int64) {
	for _, s := range l.Servers {
		c, b := s.PeerStats()
		calls += c
		bytes += b
	}
	return calls, bytes
}

// Close stops every task.
func (l *Local) Close() {
	for _, s := range l.Servers {
		s.Close()
	}
}

// writeEndpointMap writes em to path in its file form.
func writeEndpointMap(path string, em rpc.EndpointMap) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cluster: endpoint map: %w", err)
	}
	_, werr := em.WriteTo(f)
	return errors.Join(werr, f.Close())
}
