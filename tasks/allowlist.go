package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/afxdp/link"
	"github.com/starwire/starwire/xdp"
)

// AllowlistEvery is how often a task serving AF_XDP reads its cluster again
// (Server.Reread) and resolves the tasks' names again, so that its XDP
// allowlist follows tasks that move (a Kubernetes pod restarted with a new
// IP keeps its name).
const AllowlistEvery = 10 * time.Second

// An allowlist keeps the allowlists of a task's XDP programs equal to the
// IPv4 addresses of its cluster's starwire endpoints: packets to the
// starwire port from anywhere else are dropped in XDP and counted
// (xdp.Counters.NotAllowed, starwire_xdp_packets_total{verdict="not_allowed"}).
type allowlist struct {
	progs  []*xdp.Program
	logger *slog.Logger

	mu   sync.Mutex
	cur  map[netip.Addr]bool
	stop chan struct{}
	done chan struct{}
}

// xdpPrograms returns the steering programs of the task's AF_XDP
// endpoints, each once.
func (s *Server) xdpPrograms() []*xdp.Program {
	var out []*xdp.Program
	seen := map[*xdp.Program]bool{}
	for _, c := range s.xdpEPs {
		ep, ok := c.(*afxdp.Endpoint)
		if !ok {
			continue
		}
		if xl, ok := ep.Link().(*link.XSKLink); ok && xl.Program() != nil && !seen[xl.Program()] {
			seen[xl.Program()] = true
			out = append(out, xl.Program())
		}
	}
	return out
}

// allowOnly makes ep's XDP program steer packets from peer alone, as the
// end of a link to one task.
func allowOnly(ep *afxdp.Endpoint, peer netip.Addr) error {
	xl, ok := ep.Link().(*link.XSKLink)
	if !ok || xl.Program() == nil {
		return nil
	}
	if err := xl.Program().Allow(peer); err != nil {
		return err
	}
	return xl.Program().SetAllowlist(true)
}

// startAllowlist fills the allowlists of the task's XDP programs from
// layout, turns them on, and keeps them current every AllowlistEvery until
// the task closes. A name that does not resolve yet is left out, with a
// warning, and tried again.
func (s *Server) startAllowlist(layout Layout, logger *slog.Logger) error {
	progs := s.xdpPrograms()
	if len(progs) == 0 {
		return nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	a := &allowlist{progs: progs, logger: logger, cur: map[netip.Addr]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), AllowlistEvery)
	err := a.update(ctx, layout)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: xdp allowlist: %w", s.Task(), err)
	}
	for _, p := range progs {
		if err := p.SetAllowlist(true); err != nil {
			return fmt.Errorf("%s: %w", s.Task(), err)
		}
	}
	s.allow = a
	go a.follow(s.Reread, layout)
	return nil
}

// follow updates the allowlist every AllowlistEvery from reread, or from
// layout's names resolved again when reread is nil.
func (a *allowlist) follow(reread func(context.Context) (Layout, error), layout Layout) {
	defer close(a.done)
	t := time.NewTicker(AllowlistEvery)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), AllowlistEvery)
		l := layout
		var err error
		if reread != nil {
			l, err = reread(ctx)
		}
		if err == nil {
			err = a.update(ctx, l)
		}
		cancel()
		if err != nil {
			a.logger.Warn("xdp allowlist: keeping the last one", "err", err)
		}
	}
}

func (a *allowlist) close() {
	close(a.stop)
	<-a.done
}

// Addrs returns the addresses allowed now, sorted.
func (a *allowlist) addrs() []netip.Addr {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]netip.Addr, 0, len(a.cur))
	for ip := range a.cur {
		out = append(out, ip)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Less(out[j]) })
	return out
}

// update makes the programs allow exactly the addresses of layout's
// starwire endpoints (those that resolve).
func (a *allowlist) update(ctx context.Context, layout Layout) error {
	want, err := starIPs(ctx, layout)
	if err != nil && len(want) == 0 {
		return err
	}
	if err != nil {
		a.logger.Warn("xdp allowlist: leaving out tasks whose address does not resolve", "err", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for ip := range want {
		if !a.cur[ip] {
			for _, p := range a.progs {
				errs = append(errs, p.Allow(ip))
			}
			a.cur[ip] = true
		}
	}
	for ip := range a.cur {
		if !want[ip] {
			for _, p := range a.progs {
				errs = append(errs, p.Disallow(ip))
			}
			delete(a.cur, ip)
		}
	}
	return errors.Join(errs...)
}

// starIPs returns the IPv4 addresses of the starwire endpoints of every task
// of layout, names resolved.
func starIPs(ctx context.Context, layout Layout) (map[netip.Addr]bool, error) {
	out := map[netip.Addr]bool{}
	var errs []error
	for _, job := range layout.Cluster.Jobs() {
		for _, i := range layout.Cluster.TaskIndices(job) {
			addr, err := layout.Endpoints.StarAddr(layout.Cluster, job, i)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				errs = append(errs, fmt.Errorf("starwire address %q: %w", addr, err))
				continue
			}
			ips, err := resolve4(ctx, host)
			if err != nil {
				errs = append(errs, err)
			}
			for _, ip := range ips {
				out[ip] = true
			}
		}
	}
	return out, errors.Join(errs...)
}

func resolve4(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip = ip.Unmap(); !ip.Is4() {
			return nil, fmt.Errorf("%s: the packet path is IPv4 only", host)
		}
		return []netip.Addr{ip}, nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}
