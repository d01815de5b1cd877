package flags

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
)

// Cluster says which cluster a command joins and how: a cluster spec
// (--cluster or TF_CONFIG's "cluster"), or a registry directory tasks
// started on port 0 publish their addresses in; the protocol; and, for
// grpc+seastar with a cluster spec, the endpoint map.
type Cluster struct {
	Protocol    string
	Spec        cluster.Spec
	EndpointMap string
	RegistryDir string
	WaitTimeout time.Duration
	TFConfig    *cluster.TFConfig // TF_CONFIG when set, once Layout has run
	TLS         TLS
	Packet      Packet
	Allowlist   bool
	// Report, when not nil, is told every WaitReportEvery of a wait for
	// --registry_dir's tasks which of them are not registered yet.
	Report func(msg string)
}

// WaitReportEvery is the interval between a registry wait's reports.
const WaitReportEvery = 5 * time.Second

// Register adds the flags to fs.
func (c *Cluster) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.Protocol, "protocol", string(cluster.ProtocolGRPCSeastar), `"grpc+seastar" (worker service over starwire) or "grpc"; default TF_CONFIG's rpc_layer when set`)
	fs.Var(&c.Spec, "cluster", "the cluster `spec`, ps=host:port,...;worker=host:port,... (default TF_CONFIG's cluster)")
	fs.StringVar(&c.EndpointMap, "endpoint_map", "", "endpoint map file for grpc+seastar (default $"+cluster.EnvEndpointMapPath+" or ./"+cluster.DefaultEndpointMapFile+")")
	fs.StringVar(&c.RegistryDir, "registry_dir", "", "directory where tasks started on port 0 publish their addresses, one process a task: a second started for a live task is refused, naming it (atomically where the file system has hard links; without them, as on FAT or some FUSE mounts, two started in the same instant may both register)")
	fs.DurationVar(&c.WaitTimeout, "cluster_wait", time.Minute, "how long to wait for every task to register in --registry_dir")
	c.TLS.Register(fs)
	c.Packet.Register(fs)
	fs.BoolVar(&c.Allowlist, "xdp_allowlist", true, "on AF_XDP, drop in XDP the packets to starwire's port from addresses that are not the cluster's tasks' (counted in starwire_xdp_packets_total{verdict=\"not_allowed\"}); the list follows the cluster spec, endpoint map or registry, names resolved again every "+tasks.AllowlistEvery.String())
}

// Guard has a task's XDP allowlist follow the cluster as the flags name it
// (n as the task joined it), unless --xdp_allowlist=false.
func (c *Cluster) Guard(s *tasks.Server, set map[string]bool, n Need) {
	s.NoAllowlist = !c.Allowlist
	s.Reread = func(ctx context.Context) (tasks.Layout, error) {
		l, _, err := c.Layout(ctx, set, n)
		return l, err
	}
}

// A Need says what a command needs of the cluster it joins.
type Need struct {
	// PS and Workers are the job sizes a registry directory must hold.
	PS, Workers int
	// Jobs are the jobs the command uses; the cluster's others (a chief,
	// an evaluator) are dropped. Nil keeps every job.
	Jobs []string
	// Self is the command's own task, when it is one of the cluster's: it
	// is looked up before the endpoint map is read, so that a wrong task
	// is reported as such rather than as a missing map.
	Self *TaskRef
}

// A TaskRef names one task of a cluster.
type TaskRef struct {
	Job   string
	Index int
}

// Layout returns the cluster to join and whether one was given at all
// (false: the command starts its own).
func (c *Cluster) Layout(ctx context.Context, set map[string]bool, n Need) (tasks.Layout, bool, error) {
	var l tasks.Layout
	tlsFiles, err := c.TLS.Get()
	if err != nil {
		return l, false, err
	}
	l.TLS = tlsFiles
	cfg, ok, err := cluster.LoadTFConfig()
	if err != nil {
		return l, false, Usagef("%v", err)
	}
	if ok {
		c.TFConfig = &cfg
	}
	proto := c.Protocol
	if !set["protocol"] && c.TFConfig != nil && c.TFConfig.RPCLayer != "" {
		proto = string(c.TFConfig.RPCLayer)
	}
	if l.Protocol, err = cluster.ParseProtocol(proto); err != nil {
		return l, false, Usagef("%v", err)
	}
	given := 0
	for _, b := range []bool{set["cluster"], c.RegistryDir != "", c.TFConfig != nil && c.TFConfig.Cluster.Len() > 0} {
		if b {
			given++
		}
	}
	switch {
	case given == 0:
		return l, false, nil
	case set["cluster"] && c.RegistryDir != "":
		return l, false, Usagef("--cluster and --registry_dir both name the cluster; give one")
	case c.RegistryDir != "":
		roster, err := c.wait(ctx, n.PS, n.Workers)
		if err != nil {
			return l, false, err
		}
		l.Cluster, l.Endpoints = roster.Cluster, roster.Endpoints
	case set["cluster"]:
		l.Cluster = c.Spec
	default:
		l.Cluster = c.TFConfig.Cluster
	}
	if n.Self != nil {
		if _, err := l.Cluster.Lookup(n.Self.Job, n.Self.Index); err != nil {
			return l, false, Usagef("%v", err)
		}
	}
	if n.Jobs != nil {
		l.Cluster = l.Cluster.Subset(n.Jobs...)
	}
	if l.Protocol.UsesStar() && l.Endpoints.Len() == 0 {
		if c.EndpointMap != "" {
			l.Endpoints, err = cluster.ReadEndpointMap(c.EndpointMap)
		} else {
			l.Endpoints, err = cluster.LoadEndpointMap()
		}
		if err != nil {
			return l, false, Usagef("%v", err)
		}
	}
	if err := l.Check(); err != nil {
		return l, false, Usagef("%v", err)
	}
	return l, true, nil
}

// wait waits for ps and workers tasks to register in the registry directory.
func (c *Cluster) wait(ctx context.Context, ps, workers int) (cluster.Roster, error) {
	if ps <= 0 || workers <= 0 {
		return cluster.Roster{}, Usagef("--registry_dir needs --ps and --workers > 0")
	}
	jobs := map[string]int{"ps": ps, "worker": workers}
	ctx, cancel := context.WithTimeout(ctx, c.WaitTimeout)
	defer cancel()
	if c.Report != nil {
		var wg sync.WaitGroup
		wg.Go(func() { c.reportWaiting(ctx, jobs) })
		defer wg.Wait()
		defer cancel() // ends the reports before wg.Wait
	}
	roster, err := cluster.Wait(ctx, c.RegistryDir, jobs)
	if err != nil {
		return cluster.Roster{}, err
	}
	return roster, nil
}

// reportWaiting tells c.Report every WaitReportEvery, until ctx is done,
// the tasks of jobs not registered in the registry directory.
func (c *Cluster) reportWaiting(ctx context.Context, jobs map[string]int) {
	start := time.Now()
	t := time.NewTicker(WaitReportEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		missing, total := unregistered(c.RegistryDir, jobs)
		if len(missing) == 0 {
			continue // all there: Wait returns at its next scan
		}
		const show = 8
		n, more := len(missing), ""
		if n > show {
			more = fmt.Sprintf(" and %d more", n-show)
			missing = missing[:show]
		}
		c.Report(fmt.Sprintf("waiting for %d of %d tasks to register in %s (%v of --cluster_wait %v): %s%s",
			n, total, c.RegistryDir, time.Since(start).Round(time.Second), c.WaitTimeout, strings.Join(missing, ", "), more))
	}
}

// unregistered lists, in job and task order, the tasks of jobs without a
// valid entry in dir ("stale" marks an entry whose owner is gone), and
// counts the tasks of jobs.
func unregistered(dir string, jobs map[string]int) (missing []string, total int) {
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		for task := range jobs[job] {
			total++
			if _, err := cluster.Lookup(dir, job, task); err != nil {
				name := shortTaskName(job, task)
				if errors.Is(err, cluster.ErrStale) {
					name += " (stale entry)"
				}
				missing = append(missing, name)
			}
		}
	}
	return missing, total
}

// shortTaskName writes a task as job:index.
func shortTaskName(job string, task int) string { return job + ":" + strconv.Itoa(task) }
