package tasks

import (
	"crypto/tls"
	"fmt"
	"sync"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// Layout is what every process of a cluster agrees on: the protocol, the
// tasks' gRPC addresses, and, under grpc+seastar, their starwire addresses.
type Layout struct {
	Protocol  cluster.Protocol
	Cluster   cluster.Spec
	Endpoints cluster.EndpointMap
	// Transport carries starwire calls; nil means TCP.
	Transport rpc.Transport
	// Interceptors wrap the starwire calls to every task.
	Interceptors []rpc.ClientInterceptor
	// TLS, when set, secures gRPC and, when Transport is nil, starwire's
	// TCP with mutual TLS 1.3. A Transport given must carry its own.
	TLS *tcp.TLSFiles
	// FailFast makes starwire calls to a task that cannot be reached fail
	// at once instead of waiting for it (a driver's, which watches the
	// tasks' health; see rpc.ClientOptions.FailFast).
	FailFast bool
}

// Check reports a layout that cannot work: no tasks, or a task without a
// starwire address under grpc+seastar.
func (l *Layout) Check() error {
	if l.Cluster.Len() == 0 {
		return fmt.Errorf("empty cluster spec")
	}
	if l.Protocol.UsesStar() {
		if err := l.Endpoints.CheckCluster(l.Cluster); err != nil {
			return err
		}
	}
	return nil
}

// Peers hands out one cached Caller per task, over the layout's protocol.
// A task's Resolver and the driver both take their Callers from a Peers.
// Safe for concurrent use.
type Peers struct {
	layout Layout

	mu      sync.Mutex
	callers map[string]driver.Caller
	routes  map[string]route
	moved   map[string]Addrs // tasks restarted elsewhere (see Repoint)
	closed  bool
	star    rpc.Transport // the layout's Transport, or TCP with its TLS
}

// A route reaches one task by another transport and address than the
// layout's, such as an AF_XDP endpoint on a link to it.
type route struct {
	transport rpc.Transport
	addr      string
}

// Route makes calls to task go to addr over transport. Call it before the
// task's Caller is first asked for.
func (p *Peers) Route(task string, transport rpc.Transport, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.routes == nil {
		p.routes = make(map[string]route)
	}
	p.routes[task] = route{transport, addr}
}

// Addrs are a task's addresses: gRPC, and starwire's under grpc+seastar.
type Addrs struct {
	GRPC, Star string
}

// Repoint makes calls to task go to addrs from now on, a task that
// restarted, at other addresses or the same: its Caller is closed and
// the next one asked for dials addrs afresh. It returns whether the
// addresses changed.
func (p *Peers) Repoint(task string, addrs Addrs) (bool, error) {
	cur, err := p.Addrs(task)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	if p.moved == nil {
		p.moved = make(map[string]Addrs)
	}
	p.moved[task] = addrs
	delete(p.routes, task)
	old := p.callers[task]
	delete(p.callers, task)
	p.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return cur != addrs, nil
}

// Addrs returns the addresses calls to task go to: the layout's, or the
// last Repoint's.
func (p *Peers) Addrs(task string) (Addrs, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.addrsLocked(task)
}

func (p *Peers) addrsLocked(task string) (Addrs, error) {
	if a, ok := p.moved[task]; ok {
		return a, nil
	}
	job, idx, err := cluster.ParseTaskName(task)
	if err != nil {
		return Addrs{}, err
	}
	var a Addrs
	if a.GRPC, err = p.layout.Cluster.Lookup(job, idx); err != nil {
		return Addrs{}, err
	}
	if p.layout.Protocol.UsesStar() && !p.layout.Endpoints.GRPCOnly(p.layout.Cluster, job) {
		if a.Star, err = p.layout.Endpoints.StarAddr(p.layout.Cluster, job, idx); err != nil {
			return Addrs{}, err
		}
	}
	return a, nil
}

// NewPeers returns the peers of layout.
func NewPeers(layout Layout) *Peers {
	return &Peers{layout: layout, callers: make(map[string]driver.Caller)}
}

// Layout returns the layout the peers were made from.
func (p *Peers) Layout() Layout { return p.layout }

// Caller returns the Caller of task ("/job:ps/replica:0/task:0").
func (p *Peers) Caller(task string) (driver.Caller, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.callers[task]; c != nil {
		return c, nil
	}
	if p.closed {
		return nil, fmt.Errorf("peers closed")
	}
	addrs, err := p.addrsLocked(task)
	if err != nil {
		return nil, err
	}
	grpcAddr, starAddr := addrs.GRPC, addrs.Star
	var c driver.Caller
	if r, ok := p.routes[task]; ok {
		c = handlers.NewStarCaller(task, rpc.NewClient(r.addr, rpc.ClientOptions{Name: task, Transport: r.transport, Interceptors: p.layout.Interceptors, FailFast: p.layout.FailFast}))
	} else if p.layout.Protocol.UsesStar() && starAddr != "" {
		// A task of a GRPCOnly job (a TensorFlow process) has no
		// starwire address: it is reached over gRPC, below.
		tr, err := p.starTransport()
		if err != nil {
			return nil, err
		}
		c = handlers.NewStarCaller(task, rpc.NewClient(starAddr, rpc.ClientOptions{Name: task, Transport: tr, Interceptors: p.layout.Interceptors, FailFast: p.layout.FailFast}))
	} else {
		opts, err := p.layout.GRPCDialOptions()
		if err != nil {
			return nil, err
		}
		gc, err := handlers.DialGRPC(task, grpcAddr, opts...)
		if err != nil {
			return nil, err
		}
		c = gc
	}
	p.callers[task] = c
	return c, nil
}

// starTransport returns what carries starwire calls to the layout's
// addresses. Called with p.mu held.
func (p *Peers) starTransport() (rpc.Transport, error) {
	if p.star != nil {
		return p.star, nil
	}
	if p.layout.Transport != nil {
		p.star = p.layout.Transport
		return p.star, nil
	}
	var cfg *tls.Config
	if p.layout.TLS != nil {
		var err error
		if cfg, err = tlsConfig(p.layout.TLS); err != nil {
			return nil, err
		}
	}
	p.star = &tcp.Transport{TLS: cfg, PlaintextHint: plaintextHint(p.layout.TLS)}
	return p.star, nil
}

// Resolve is a handlers.Resolver: a worker's remote _Recv reaches its peer
// through the same Callers as the driver's calls.
func (p *Peers) Resolve(task string) (handlers.Caller, error) {
	c, err := p.Caller(task)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Stats sums the calls and bytes of every Caller handed out.
func (p *Peers) Stats() handlers.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s handlers.Stats
	for _, c := range p.callers {
		s = s.Add(c.Stats())
	}
	return s
}

// StatsTo returns the calls and bytes of the Caller of task, if one was
// handed out.
func (p *Peers) StatsTo(task string) handlers.Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.callers[task]; c != nil {
		return c.Stats()
	}
	return handlers.Stats{}
}

// Close closes every Caller handed out.
func (p *Peers) Close() {
	p.mu.Lock()
	callers := p.callers
	p.callers, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range callers {
		c.Close()
	}
}
