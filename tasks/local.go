package tasks

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/internal/afxdpfabric"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// LocalOptions describe an in-process cluster.
type LocalOptions struct {
	PS, Workers int
	Protocol    cluster.Protocol
	// Net carries starwire; nil means TCP.
	Net Net
	// Dir receives the endpoint map file.
	Dir    string
	Logger *slog.Logger
	// AFXDP gives every task a network namespace, joins each worker to
	// each parameter server by a veth pair, and carries the workers' calls
	// to the servers (RecvTensor) over AF_XDP on those links. The driver's
	// calls stay on Net over loopback. It needs root; StartLocal fails
	// with the reason when it cannot.
	AFXDP bool
	// AFXDPPath chooses, per call, between a fabric link's AF_XDP session
	// and TCP when Net is TCP (see ServeAFXDP's fabricRoute).
	AFXDPPath afxdprpc.PathPolicy
	// Metrics, when set, counts every task's calls and packet endpoints.
	Metrics *metrics.Metrics
	// Compute, when set, bounds the computing kernels of every task
	// together (compute.Process: the tasks share this process's CPUs).
	Compute *compute.Limit
	// Pcap, when set, receives the frames of every task's packet path
	// (AF_XDP links; kernel UDP when Net is a UDPNet with its Pcap set).
	Pcap Capture
	// TLS, when set, secures every task's gRPC and, when Net is TCP, its
	// starwire transport with mutual TLS; the certificate must be valid
	// for 127.0.0.1.
	TLS *tcp.TLSFiles
	// NoAllowlist lets each AF_XDP endpoint of the fabric steer packets
	// from any source; by default only the task at the link's other end
	// gets through, others are dropped in XDP and counted.
	NoAllowlist bool
	// CheckpointDir is every task's checkpoint directory (Server.CheckpointDir).
	CheckpointDir string
	// StreamDir is every task's change stream directory (Server.StreamDir).
	StreamDir string
	// StreamKeep is every task's Server.StreamKeep.
	StreamKeep int
}

// xdpPort is the UDP port of every AF_XDP endpoint of a local fabric; each
// sits on its own interface, so they do not collide.
const xdpPort = 7700

// A Local is a whole cluster in this process, every task on loopback ports
// the kernel picked, each with peers of its own as separate processes
// would have.
type Local struct {
	Layout Layout
	// EndpointMapPath is the endpoint map file written for the launch.
	EndpointMapPath string
	Servers         []*Server
	// PeerTransport says what carries the tasks' calls to each other.
	PeerTransport string
	fabric        *afxdpfabric.Fabric
	pathPolicy    afxdprpc.PathPolicy
}

// StartLocal starts the cluster opts describes. On error, what it had
// started is stopped again.
func StartLocal(opts LocalOptions) (*Local, error) {
	l := &Local{}
	if err := l.start(opts); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Local) start(opts LocalOptions) error {
	protocol := opts.Protocol
	n := opts.Net
	if tn, ok := n.(TCPNet); ok || n == nil {
		// Each task is reached by every other and by the driver.
		tn.Conns = opts.PS + opts.Workers
		tn.TLS = opts.TLS
		n = tn
	}
	jobs := map[string][]string{}
	em := cluster.NewEndpointMap(filepath.Join(opts.Dir, cluster.DefaultEndpointMapFile))
	byTask := map[string]*Server{}
	var psTasks, workerTasks []string
	for _, job := range []struct {
		name string
		n    int
	}{{"ps", opts.PS}, {"worker", opts.Workers}} {
		for i := range job.n {
			s, err := Listen(job.name, i, "127.0.0.1:0", "127.0.0.1:0", protocol.UsesStar(), n)
			if err != nil {
				return err
			}
			s.Pcap = opts.Pcap
			l.Servers = append(l.Servers, s)
			byTask[s.Task()] = s
			if job.name == "ps" {
				psTasks = append(psTasks, s.Task())
			} else {
				workerTasks = append(workerTasks, s.Task())
			}
			jobs[job.name] = append(jobs[job.name], s.GRPCAddr)
			if protocol.UsesStar() {
				if err := em.Add(s.GRPCAddr, s.StarAddr); err != nil {
					return err
				}
			}
		}
	}
	spec, err := cluster.NewSpec(jobs)
	if err != nil {
		return err
	}
	if protocol.UsesStar() {
		// Written and read back, as tasks launched separately would read it.
		l.EndpointMapPath = filepath.Join(opts.Dir, cluster.DefaultEndpointMapFile)
		if err := writeEndpointMap(l.EndpointMapPath, em); err != nil {
			return err
		}
		if em, err = cluster.ReadEndpointMap(l.EndpointMapPath); err != nil {
			return err
		}
	}
	l.Layout = Layout{Protocol: protocol, Cluster: spec, Endpoints: em, TLS: opts.TLS}
	if err := l.Layout.Check(); err != nil {
		return err
	}
	if opts.AFXDP {
		l.pathPolicy = opts.AFXDPPath
		if !protocol.UsesStar() {
			return fmt.Errorf("AF_XDP carries the starwire worker service, which protocol %s does not use", protocol)
		}
		if err := l.buildFabric(psTasks, workerTasks, byTask, !opts.NoAllowlist); err != nil {
			return err
		}
	}
	for _, s := range l.Servers {
		s.Metrics = opts.Metrics
		s.Compute = opts.Compute
		s.CheckpointDir, s.StreamDir, s.StreamKeep = opts.CheckpointDir, opts.StreamDir, opts.StreamKeep
		if err := s.Start(l.Layout, opts.Logger); err != nil {
			return err
		}
	}
	return nil
}

// buildFabric joins workers to servers by veth pairs and opens an AF_XDP
// endpoint on both ends of each: each end serves on it, and routes its
// calls to the other end's task through it.
func (l *Local) buildFabric(ps, workers []string, byTask map[string]*Server, allowlist bool) error {
	f, err := afxdpfabric.Build(ps, workers, afxdpfabric.Options{Port: xdpPort,
		Endpoint: func(e vethnet.End) (link.XSKOptions, afxdp.Options) { return byTask[e.Task].endpointOptions() }})
	if err != nil {
		return err
	}
	l.fabric = f
	for _, link := range f.Links {
		srv, wrk := byTask[link.PS.Task], byTask[link.Worker.Task]
		psEP, ep := link.PSEP, link.WorkerEP
		if err := errors.Join(srv.serveEndpoint(psEP), wrk.serveEndpoint(ep)); err != nil {
			return err
		}
		if allowlist {
			if err := errors.Join(allowOnly(psEP, link.Worker.Addr), allowOnly(ep, link.PS.Addr)); err != nil {
				return fmt.Errorf("xdp allowlist of the link of %s and %s: %w", link.PS.Task, link.Worker.Task, err)
			}
		}
		wrk.PeerTransport = l.fabricPath(wrk.fabricRoute(f, srv, ep, link.PS, l.pathPolicy)) + " over veth pairs to the parameter servers"
		// A server pulls from a worker too: the ids of its shard and their
		// gradients, in a sharded embedding lookup.
		srv.PeerTransport = l.fabricPath(srv.fabricRoute(f, wrk, psEP, link.Worker, l.pathPolicy)) + " over veth pairs to the workers"
	}
	l.PeerTransport = fmt.Sprintf("AF_XDP over %d veth pairs, one per worker and server, each task in its own network namespace", len(f.Links))
	return nil
}

// fabricPath says what may carry a task's calls over its fabric links: AF_XDP,
// or with dual connections AF_XDP or TCP as the path policy chooses per call.
func (l *Local) fabricPath(dual bool) string {
	if dual {
		return "AF_XDP or TCP, per call (" + l.pathPolicy.String() + "),"
	}
	return "AF_XDP"
}

// SpinningReactors counts the AF_XDP reactors of the cluster's tasks that
// busy-poll (afxdp.Endpoint.Spinning), each of which keeps a Go P busy.
func (l *Local) SpinningReactors() int {
	n := 0
	for _, s := range l.Servers {
		for _, ep := range s.xdpEPs {
			if sp, ok := ep.(interface{ Spinning() bool }); ok && sp.Spinning() {
				n++
			}
		}
	}
	return n
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

// TaskPeerStats returns the calls the tasks made to each other that task
// made or answered.
func (l *Local) TaskPeerStats(task string) (calls, bytes int64) {
	for _, s := range l.Servers {
		var st handlers.Stats
		if s.Task() == task {
			c, b := s.PeerStats()
			st = handlers.Stats{Calls: c, Bytes: b}
		} else if s.peers != nil {
			st = s.peers.StatsTo(task)
		}
		calls, bytes = calls+st.Calls, bytes+st.Bytes
	}
	return calls, bytes
}

// Close stops every task and lets the namespaces of a fabric go.
func (l *Local) Close() {
	for _, s := range l.Servers {
		s.Close()
	}
	if l.fabric != nil {
		l.fabric.Close()
	}
}

// writeEndpointMap writes em to path in its file form.
func writeEndpointMap(path string, em cluster.EndpointMap) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("endpoint map: %w", err)
	}
	_, werr := em.WriteTo(f)
	return errors.Join(werr, f.Close())
}

// ReactorWarnings are the tasks' reactor warnings, each once.
func (l *Local) ReactorWarnings() []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range l.Servers {
		if w := s.Reactors.Warning(); w != "" && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}
