package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/wire"
)

// clusterFlags say which cluster a command joins and how: a cluster spec
// (--cluster or TF_CONFIG's "cluster"), or a registry directory tasks
// started on port 0 publish their addresses in; the protocol; and, for
// grpc+seastar with a cluster spec, the endpoint map.
type clusterFlags struct {
	protocol    string
	cluster     cluster.Spec
	endpointMap string
	registryDir string
	waitTimeout time.Duration
	tfConfig    *cluster.TFConfig // TF_CONFIG when set
	tls         tlsFlags
	packet      packetFlags
	allowlist   bool
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.protocol, "protocol", string(cluster.ProtocolGRPCSeastar), `"grpc+seastar" (worker service over starwire) or "grpc"; default TF_CONFIG's rpc_layer when set`)
	fs.Var(&c.cluster, "cluster", "the cluster `spec`, ps=host:port,...;worker=host:port,... (default TF_CONFIG's cluster)")
	fs.StringVar(&c.endpointMap, "endpoint_map", "", "endpoint map file for grpc+seastar (default $"+cluster.EnvEndpointMapPath+" or ./"+cluster.DefaultEndpointMapFile+")")
	fs.StringVar(&c.registryDir, "registry_dir", "", "directory where tasks started on port 0 publish their addresses")
	fs.DurationVar(&c.waitTimeout, "cluster_wait", time.Minute, "how long to wait for every task to register in --registry_dir")
	c.tls.register(fs)
	c.packet.register(fs)
	fs.BoolVar(&c.allowlist, "xdp_allowlist", true, "on AF_XDP, drop in XDP the packets to starwire's port from addresses that are not the cluster's tasks' (counted in starwire_xdp_packets_total{verdict=\"not_allowed\"}); the list follows the cluster spec, endpoint map or registry, names resolved again every "+tasks.AllowlistEvery.String())
}

// guard has a task's XDP allowlist follow the cluster as the flags name it
// (n as the task joined it), unless --xdp_allowlist=false.
func (c *clusterFlags) guard(s *tasks.Server, set map[string]bool, n need) {
	s.NoAllowlist = !c.allowlist
	s.Reread = func(ctx context.Context) (tasks.Layout, error) {
		l, _, err := c.layout(ctx, set, n)
		return l, err
	}
}

// A need says what a command needs of the cluster it joins.
type need struct {
	// ps and workers are the job sizes a registry directory must hold.
	ps, workers int
	// jobs are the jobs the command uses; the cluster's others (a chief,
	// an evaluator) are dropped. Nil keeps every job.
	jobs []string
	// self is the command's own task, when it is one of the cluster's: it
	// is looked up before the endpoint map is read, so that a wrong task
	// is reported as such rather than as a missing map.
	self *taskRef
}

type taskRef struct {
	job   string
	index int
}

// layout returns the cluster to join and whether one was given at all
// (false: the command starts its own).
func (c *clusterFlags) layout(ctx context.Context, set map[string]bool, n need) (tasks.Layout, bool, error) {
	var l tasks.Layout
	tlsFiles, err := c.tls.get()
	if err != nil {
		return l, false, err
	}
	l.TLS = tlsFiles
	cfg, ok, err := cluster.LoadTFConfig()
	if err != nil {
		return l, false, usagef("%v", err)
	}
	if ok {
		c.tfConfig = &cfg
	}
	proto := c.protocol
	if !set["protocol"] && c.tfConfig != nil && c.tfConfig.RPCLayer != "" {
		proto = string(c.tfConfig.RPCLayer)
	}
	if l.Protocol, err = cluster.ParseProtocol(proto); err != nil {
		return l, false, usagef("%v", err)
	}
	given := 0
	for _, b := range []bool{set["cluster"], c.registryDir != "", c.tfConfig != nil && c.tfConfig.Cluster.Len() > 0} {
		if b {
			given++
		}
	}
	switch {
	case given == 0:
		return l, false, nil
	case set["cluster"] && c.registryDir != "":
		return l, false, usagef("--cluster and --registry_dir both name the cluster; give one")
	case c.registryDir != "":
		roster, err := c.wait(ctx, n.ps, n.workers)
		if err != nil {
			return l, false, err
		}
		l.Cluster, l.Endpoints = roster.Cluster, roster.Endpoints
	case set["cluster"]:
		l.Cluster = c.cluster
	default:
		l.Cluster = c.tfConfig.Cluster
	}
	if n.self != nil {
		if _, err := l.Cluster.Lookup(n.self.job, n.self.index); err != nil {
			return l, false, usagef("%v", err)
		}
	}
	if n.jobs != nil {
		l.Cluster = l.Cluster.Subset(n.jobs...)
	}
	if l.Protocol.UsesStar() && l.Endpoints.Len() == 0 {
		if c.endpointMap != "" {
			l.Endpoints, err = cluster.ReadEndpointMap(c.endpointMap)
		} else {
			l.Endpoints, err = cluster.LoadEndpointMap()
		}
		if err != nil {
			return l, false, usagef("%v", err)
		}
	}
	if err := l.Check(); err != nil {
		return l, false, usagef("%v", err)
	}
	return l, true, nil
}

// wait waits for ps and workers tasks to register in the registry directory.
func (c *clusterFlags) wait(ctx context.Context, ps, workers int) (cluster.Roster, error) {
	if ps <= 0 || workers <= 0 {
		return cluster.Roster{}, usagef("--registry_dir needs --ps and --workers > 0")
	}
	ctx, cancel := context.WithTimeout(ctx, c.waitTimeout)
	defer cancel()
	roster, err := cluster.Wait(ctx, c.registryDir, map[string]int{"ps": ps, "worker": workers})
	if err != nil {
		return cluster.Roster{}, err
	}
	return roster, nil
}

// awaitCluster waits until every task answers GetStatus on its gRPC
// address, the master-side service every task keeps, polling until
// timeout; the error names the tasks that never answered.
func awaitCluster(ctx context.Context, l tasks.Layout, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pending := map[string]string{}
	for _, job := range l.Cluster.Jobs() {
		for _, i := range l.Cluster.TaskIndices(job) {
			addr, _ := l.Cluster.Lookup(job, i)
			pending[cluster.TaskName(job, i)] = addr
		}
	}
	last := map[string]error{}
	opts, err := l.GRPCDialOptions()
	if err != nil {
		return err
	}
	for {
		for task, addr := range pending {
			c, err := driver.DialGRPC(task, addr, opts...)
			if err == nil {
				callCtx, cancel := context.WithTimeout(ctx, time.Second)
				_, err = c.GetStatus(callCtx)
				cancel()
				c.Close()
			}
			if err == nil {
				delete(pending, task)
			} else {
				last[task] = err
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if err := refusedBy(pending, last); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			var parts []string
			for task, addr := range pending {
				parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, shortErr(last[task])))
			}
			return fmt.Errorf("cluster unreachable after %v: %s", timeout, strings.Join(parts, "; "))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// refusedBy returns an error naming the tasks that refused this client
// (unauthenticated: TLS it lacks or a certificate they do not take), which
// waiting longer cannot change; nil when none did.
func refusedBy(pending map[string]string, last map[string]error) error {
	var parts []string
	for task, addr := range pending {
		if rpc.CodeOf(last[task]) == wire.Unauthenticated {
			parts = append(parts, fmt.Sprintf("%s at %s (%v)", task, addr, shortErr(last[task])))
		}
	}
	if len(parts) == 0 {
		return nil
	}
	sort.Strings(parts)
	return fmt.Errorf("cluster refused this client: %s", strings.Join(parts, "; "))
}

// shortErr keeps the innermost cause of a long wrapped error.
func shortErr(err error) string {
	if err == nil {
		return "no answer"
	}
	var st *rpc.Status
	if errors.As(err, &st) {
		return st.Msg
	}
	return err.Error()
}

// endpointPairs lists an endpoint map on one line.
func endpointPairs(m cluster.EndpointMap) string {
	var parts []string
	for g, s := range m.All() {
		parts = append(parts, g+"="+s)
	}
	return strings.Join(parts, " ")
}
