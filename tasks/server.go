package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"

	"github.com/starwire/starwire/afxdp/afxdprpc"
	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/handlers/record"
	"github.com/starwire/starwire/metrics"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire/tfpb"
)

// ErrAddrInUse is returned (wrapped) when a task's port is taken.
var ErrAddrInUse = errors.New("address already in use")

// A Server is one task: its listeners, and once started its worker and
// servers.
type Server struct {
	Job   string
	Index int
	// GRPCAddr and StarAddr are the addresses the listeners got (StarAddr
	// is empty when the protocol does not use starwire).
	GRPCAddr, StarAddr string
	// PeerTransport describes what carries the task's calls to its peers
	// when it is not the starwire listener's transport (see ServeAFXDP).
	PeerTransport string
	// Reactors is the reactor count of the task's TCP transport; N is 0
	// when starwire is not on TCP.
	Reactors cluster.ReactorCount
	// Metrics, when set before Start, counts the task's starwire calls and
	// packet endpoints.
	Metrics *metrics.Metrics
	// Compute, when set before Start, bounds the worker's computing
	// kernels (handlers.Options.Compute).
	Compute *compute.Limit
	// CheckpointDir, when set before Start, is where the worker's
	// checkpoint ops read and write (handlers.Options.CheckpointDir).
	CheckpointDir string
	// StreamDir, when set before Start, is where the worker's embedding
	// variables' change stream is written (handlers.Options.StreamDir).
	StreamDir string
	// StreamKeep is how many versions of the stream are kept
	// (handlers.Options.StreamKeep).
	StreamKeep int
	// RecordDir, when set before Start, is where every request the task
	// receives over gRPC is written (package handlers/record).
	RecordDir string
	// Pcap, when set before ServeAFXDP, receives the AF_XDP frames.
	Pcap Capture
	// PacketAuth, set before ServeAFXDP, says who may open sessions with
	// its endpoint.
	PacketAuth PacketAuth
	// AFXDPPath, set before ServeAFXDP, says which calls to peers take
	// AF_XDP rather than TCP; the zero value measures (PathAuto).
	AFXDPPath afxdprpc.PathPolicy
	// NoAllowlist, set before Start, lets the XDP program of ServeAFXDP
	// steer packets from any source; by default only the cluster's
	// starwire addresses get through (see AllowlistEvery).
	NoAllowlist bool
	// Reread, when set before Start, reads the cluster again (a registry
	// directory, an endpoint map) for the allowlist; nil keeps the layout
	// Start got, its names resolved again.
	Reread func(context.Context) (Layout, error)
	// Lookup, when set before Start, reads one task's addresses again
	// (its registry entry), for a peer that restarted elsewhere; nil
	// reads the whole cluster again (Reread).
	Lookup  func(task string) (Addrs, error)
	netName string // the starwire transport's Name
	allow   *allowlist
	paths   pathCounter // the task's starwire calls to its peers, per path

	grpcL  net.Listener
	starL  rpc.Listener
	starTr rpc.Transport  // carries the task's calls to its peers
	starC  io.Closer      // closes what the starwire transport holds
	xdpLs  []rpc.Listener // AF_XDP listeners (ServeAFXDP, local fabrics)
	xdpEPs []io.Closer
	peerTr rpc.Transport    // overrides starTr for peer calls
	routes map[string]route // overrides the layout for some peers
	// dualRoutes override the layout for some peers over dual
	// connections, which Start makes: duals.
	dualRoutes []dualRoute
	duals      []*afxdprpc.DualTransport
	// peerDuals carries the calls to peers of a task serving AF_XDP over
	// TCP too (ServeAFXDP); nil otherwise.
	peerDuals *peerDuals
	grpcSrv   *grpc.Server
	starSrv   *rpc.Server
	worker    *handlers.Worker
	peers     *Peers
	logger    *slog.Logger
	health    *health.Server // the state both ports' health checks report
	onClose   []func()
}

// Listen binds task index of job: gRPC at grpcAddr and, when useStar, the
// starwire worker service at starAddr over n (nil means TCP). Port 0 picks
// a free port; the addresses got are in the Server.
func Listen(job string, index int, grpcAddr, starAddr string, useStar bool, n Net) (*Server, error) {
	task := cluster.TaskName(job, index)
	s := &Server{Job: job, Index: index, health: newHealth()}
	l, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return nil, listenError(task, "grpc", grpcAddr, err)
	}
	s.grpcL, s.GRPCAddr = l, l.Addr().String()
	if useStar {
		if tcp, ok := n.(TCPNet); ok || n == nil {
			tcp.Job = job
			s.Reactors = cluster.Reactors(job, tcp.Conns)
			n = tcp
		}
		s.netName = n.Name()
		sl, tr, c, err := n.Listen(starAddr)
		if err != nil {
			l.Close()
			return nil, listenError(task, "starwire", starAddr, err)
		}
		s.starL, s.starTr, s.starC, s.StarAddr = sl, tr, c, sl.Addr().String()
	}
	return s, nil
}

// A LayoutError says that a task is not in the layout it is to join, or
// lacks an address there; waiting or retrying cannot change it.
type LayoutError struct{ Err error }

func (e *LayoutError) Error() string { return e.Err.Error() }
func (e *LayoutError) Unwrap() error { return e.Err }

// ListenAt binds task index of job at its addresses in layout: its gRPC
// address in the cluster spec and, under grpc+seastar, its starwire
// address in the endpoint map, on every interface at the address's port
// when its host is a name (a cluster spec's hostnames). A TCPNet's
// reactors are sized for the cluster's connections. A task missing from
// layout is a *LayoutError.
func ListenAt(layout Layout, job string, index int, n Net) (*Server, error) {
	grpcAddr, err := layout.Cluster.Lookup(job, index)
	if err != nil {
		return nil, &LayoutError{err}
	}
	var starAddr string
	if layout.Protocol.UsesStar() {
		if starAddr, err = layout.Endpoints.StarAddr(layout.Cluster, job, index); err != nil {
			return nil, &LayoutError{err}
		}
	}
	return Listen(job, index, bindAddr(grpcAddr), bindAddr(starAddr), layout.Protocol.UsesStar(), SizeFor(n, layout.Cluster.Len()))
}

// SizeFor returns n with a TCPNet's reactors sized for conns connections
// (cluster.Reactors); other nets as they are.
func SizeFor(n Net, conns int) Net {
	if tcp, ok := n.(TCPNet); ok {
		tcp.Conns = conns
		return tcp
	}
	return n
}

// bindAddr listens on every interface at an address's port when its host
// is a name rather than an IP.
func bindAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return addr
	}
	if net.ParseIP(host) != nil {
		return addr
	}
	if _, err := strconv.Atoi(port); err != nil {
		return addr
	}
	return net.JoinHostPort("", port)
}

func listenError(task, what, addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: %s port %s: %w", task, what, addr, ErrAddrInUse)
	}
	return fmt.Errorf("%s: listen %s on %s: %w", task, what, addr, err)
}

// Task returns the task's name.
func (s *Server) Task() string { return cluster.TaskName(s.Job, s.Index) }

// Start creates the task's worker, which reaches its peers in layout over
// the task's own starwire transport, and serves it on the listeners.
func (s *Server) Start(layout Layout, logger *slog.Logger) error {
	layout.Transport = s.starTr
	if s.peerTr != nil {
		layout.Transport = s.peerTr
	}
	if s.Metrics != nil {
		s.export(&layout)
	}
	layout.Interceptors = append(layout.Interceptors[:len(layout.Interceptors):len(layout.Interceptors)], s.paths.interceptor)
	peers := NewPeers(layout)
	for task, r := range s.routes {
		peers.Route(task, r.transport, r.addr)
	}
	s.startDuals(peers, logger)
	s.peers, s.logger = peers, logger
	w, err := handlers.NewWorker(handlers.Options{Job: s.Job, Task: s.Index, Resolver: peers.Resolve, Cluster: s.followCluster,
		Logger: logger, Compute: s.Compute, CheckpointDir: s.CheckpointDir, StreamDir: s.StreamDir, StreamKeep: s.StreamKeep})
	if err != nil {
		return fmt.Errorf("%s: %w", s.Task(), err)
	}
	opts, err := grpcServerOptions(layout.TLS)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Task(), err)
	}
	if s.RecordDir != "" {
		rec, err := record.Interceptor(s.RecordDir)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Task(), err)
		}
		opts = append(opts, grpc.ChainUnaryInterceptor(rec))
	}
	s.worker = w
	s.grpcSrv = grpc.NewServer(append(opts, grpc.MaxRecvMsgSize(1<<31-1), grpc.MaxSendMsgSize(1<<31-1))...)
	tfpb.RegisterWorkerServiceServer(s.grpcSrv, w.GRPCService())
	if err := s.serveEager(w, logger); err != nil {
		return err
	}
	s.grpcSrv.RegisterService(&infoDesc, s)
	if s.starL != nil {
		s.starSrv = rpc.NewServer()
		s.starSrv.Logger = logger
		s.starSrv.Interceptors = s.serverInterceptors()
		w.Register(s.starSrv)
	}
	if !s.NoAllowlist && s.peerTr != nil {
		if err := s.startAllowlist(layout, logger); err != nil {
			return err
		}
	}
	s.registerProbes(s.grpcSrv, s.starSrv)
	go s.grpcSrv.Serve(s.grpcL)
	if s.starSrv != nil {
		go s.starSrv.Serve(s.starL)
		for _, l := range s.xdpLs {
			go s.starSrv.Serve(l)
		}
	}
	s.setServing(true)
	return nil
}

// followCluster points the task's peers at the addresses a master's
// CreateWorkerSession carries, where a peer restarted elsewhere: the
// session gives its gRPC address; under grpc+seastar the starwire one
// is looked up in the endpoint map, or, when the map lacks it, in the
// peer's registry entry (Lookup) or the cluster read again (Reread).
// Tasks this one does not know are ignored, and so, with a warning, is an
// address without a starwire one: a master may name the tasks otherwise.
func (s *Server) followCluster(def *tfpb.ClusterDef) error {
	layout := s.peers.Layout()
	var fresh *Layout
	for _, job := range def.GetJob() {
		for idx, grpcAddr := range job.GetTasks() {
			task := cluster.TaskName(job.GetName(), int(idx))
			cur, err := s.peers.Addrs(task)
			if task == s.Task() || err != nil || cur.GRPC == grpcAddr {
				continue
			}
			a := Addrs{GRPC: grpcAddr}
			if layout.Protocol.UsesStar() {
				star, err := layout.Endpoints.Lookup(grpcAddr)
				if err != nil && s.Lookup != nil {
					var got Addrs
					if got, err = s.Lookup(task); err == nil && got.GRPC != grpcAddr {
						err = fmt.Errorf("registered at %s", got.GRPC)
					}
					star = got.Star
				} else if err != nil && s.Reread != nil {
					if fresh == nil {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						l, rerr := s.Reread(ctx)
						cancel()
						if rerr != nil {
							s.logger.Warn("a session names a peer elsewhere, and the cluster cannot be read again", "peer", task, "addr", grpcAddr, "err", rerr)
							continue
						}
						fresh = &l
					}
					star, err = fresh.Endpoints.Lookup(grpcAddr)
				}
				if err != nil {
					s.logger.Warn("a session names a peer elsewhere, without its starwire address: calls to it stay where they went", "peer", task, "addr", grpcAddr, "err", err)
					continue
				}
				a.Star = star
			}
			if _, err := s.peers.Repoint(task, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// PeerPath says what carries the task's calls to its peers: AF_XDP when
// ServeAFXDP succeeded, else the starwire transport, or gRPC when the
// protocol has no starwire worker service.
func (s *Server) PeerPath() string {
	switch {
	case s.PeerTransport != "":
		return s.PeerTransport
	case s.starL == nil:
		return "gRPC"
	}
	return s.netName
}

// Worker returns the task's worker, nil before Start.
func (s *Server) Worker() *handlers.Worker { return s.worker }

// PeerStats returns the calls this task made to its peers.
func (s *Server) PeerStats() (calls, bytes int64) {
	if s.peers == nil {
		return 0, 0
	}
	st := s.peers.Stats()
	return st.Calls, st.Bytes
}

// Close marks the task NOT_SERVING, stops the servers, waiting up to a
// second for calls in flight, and closes the task's peer connections.
func (s *Server) Close() {
	s.Drain()
	if s.starSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.starSrv.Shutdown(ctx)
		cancel()
	} else if s.starL != nil {
		s.starL.Close()
	}
	if s.grpcSrv != nil {
		stopped := make(chan struct{})
		go func() { s.grpcSrv.GracefulStop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(time.Second):
			s.grpcSrv.Stop()
		}
	} else {
		s.grpcL.Close()
	}
	if s.peers != nil {
		s.peers.Close()
	}
	if s.starC != nil {
		s.starC.Close()
	}
	if s.allow != nil {
		s.allow.close()
	}
	for _, ep := range s.xdpEPs {
		ep.Close()
	}
	for _, f := range s.onClose {
		f()
	}
}

// OnClose has Close call f once the task has stopped serving.
func (s *Server) OnClose(f func()) { s.onClose = append(s.onClose, f) }

// NetName names the starwire transport, "" when there is none.
func (s *Server) NetName() string { return s.netName }
