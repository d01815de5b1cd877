package clustercmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/starwire/starwire/internal/netns"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/rpc/cluster"
)

// The ports every task of a test cluster listens on, each on its own host:
// TensorFlow's customary gRPC port, and the next for starwire (TCP, and
// UDP for AF_XDP).
const (
	testGRPCPort = 2222
	testStarPort = 2223
)

// A testCluster is a cluster of test hosts: its shape, where its state is
// kept, and, in the process that built it, the segment and the tasks it
// started.
type testCluster struct {
	Name     string `json:"name"`
	Owner    int    `json:"owner,omitempty"` // the "cluster run" process that removes it; 0 for "up"
	Subnet   string `json:"subnet"`
	Protocol string `json:"protocol"`
	Hosts    []host `json:"hosts"`

	dir   string
	seg   *vethnet.Segment
	tasks []*task
}

// A host is one namespace of the cluster and the task it holds.
type host struct {
	Name  string `json:"name"` // ps0, worker1, chief
	NS    string `json:"namespace"`
	Addr  string `json:"address"`
	Job   string `json:"job"`
	Index int    `json:"index"`
}

func (h host) grpcAddr() string { return net.JoinHostPort(h.Addr, strconv.Itoa(testGRPCPort)) }
func (h host) starAddr() string { return net.JoinHostPort(h.Addr, strconv.Itoa(testStarPort)) }
func (h host) task() string     { return cluster.TaskName(h.Job, h.Index) }

// errNeedsRoot is the one line a user without the capabilities gets.
var errNeedsRoot = errors.New("needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) to make network namespaces and links")

// buildCluster records the cluster's state, then builds its hosts and
// writes each one's .endpoint_map. The state comes first, so that a
// process killed while building leaves something "down" (or the next
// "run") finds. owner is the pid of the process that will remove it, 0
// when "down" will.
func buildCluster(s shapeFlags, owner int) (_ *testCluster, err error) {
	c := &testCluster{Name: s.name, Owner: owner, Subnet: s.prefix.String(), Protocol: s.protocol, dir: filepath.Join(s.stateDir, s.name)}
	if _, err := os.Stat(c.dir); err == nil {
		return nil, fmt.Errorf("cluster %s exists (%s): remove it with %q", s.name, c.dir, downCommand(s.name, s.stateDir))
	}
	if ns, _ := vethnet.SegmentNamespaces(s.name); len(ns) > 0 {
		return nil, fmt.Errorf("namespaces of a cluster %s exist (%s): remove them with %q", s.name, strings.Join(ns, " "), downCommand(s.name, s.stateDir))
	}
	var names []string
	addr := s.prefix.Addr()
	add := func(job string, n int) {
		for i := range n {
			name := job + strconv.Itoa(i)
			if job == "chief" {
				name = job
			}
			addr = addr.Next()
			c.Hosts = append(c.Hosts, host{Name: name, NS: vethnet.NSName(s.name, name), Addr: addr.String(), Job: job, Index: i})
			names = append(names, name)
		}
	}
	add("ps", s.ps)
	add("worker", s.workers)
	add("chief", 1)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: %v", errNeedsRoot, err)
		}
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errorsJoin(err, c.teardown())
		}
	}()
	if err := c.save(); err != nil {
		return nil, err
	}
	if c.seg, err = vethnet.BuildSegment(s.name, s.prefix, names); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return nil, errNeedsRoot
		}
		return nil, err
	}
	return c, c.writeConfig()
}

// save writes the cluster's state file.
func (c *testCluster) save() error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, "state.json"), append(data, '\n'), 0o644)
}

// loadCluster reads the state of the cluster called name.
func loadCluster(stateDir, name string) (*testCluster, error) {
	dir := filepath.Join(stateDir, name)
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	c := &testCluster{dir: dir}
	if err := json.Unmarshal(data, c); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", dir, err)
	}
	if c.Name != name {
		return nil, fmt.Errorf("cluster state %s: names cluster %q", dir, c.Name)
	}
	return c, nil
}

// spec is the cluster spec every task is given: TF_CONFIG's "cluster", as
// Kubeflow's TFJob sets it, the chief included.
func (c *testCluster) spec() (cluster.Spec, error) {
	jobs := map[string][]string{}
	for _, h := range c.Hosts {
		jobs[h.Job] = append(jobs[h.Job], h.grpcAddr())
	}
	return cluster.NewSpec(jobs)
}

// endpointMap gives every task's starwire address: its host's, on
// testStarPort.
func (c *testCluster) endpointMap() (cluster.EndpointMap, error) {
	m := cluster.NewEndpointMap(cluster.DefaultEndpointMapFile)
	for _, h := range c.Hosts {
		if err := m.Add(h.grpcAddr(), h.starAddr()); err != nil {
			return m, err
		}
	}
	return m, nil
}

// writeConfig writes each host's directory: its .endpoint_map, which the
// task reads from its working directory, and its TF_CONFIG (tf_config).
func (c *testCluster) writeConfig() error {
	m, err := c.endpointMap()
	if err != nil {
		return err
	}
	for _, h := range c.Hosts {
		dir := filepath.Join(c.dir, h.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		tf, err := c.tfConfig(h)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "tf_config"), []byte(tf+"\n"), 0o644); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, cluster.DefaultEndpointMapFile))
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "# cluster %s: gRPC address = starwire address\n", c.Name)
		_, err = m.WriteTo(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tfConfig is TF_CONFIG for h's task.
func (c *testCluster) tfConfig(h host) (string, error) {
	spec, err := c.spec()
	if err != nil {
		return "", err
	}
	data, err := json.Marshal(map[string]any{
		"cluster":   spec,
		"task":      map[string]any{"type": h.Job, "index": h.Index},
		"rpc_layer": c.Protocol,
	})
	return string(data), err
}

// env is the environment of h's process: this one's, but with h's
// TF_CONFIG, and the endpoint map read from its working directory.
func (c *testCluster) env(h host) ([]string, error) {
	tf, err := c.tfConfig(h)
	if err != nil {
		return nil, err
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != cluster.EnvTFConfig && k != cluster.EnvEndpointMapPath {
			env = append(env, kv)
		}
	}
	return append(env, cluster.EnvTFConfig+"="+tf), nil
}

// hostNamed returns the host named name.
func (c *testCluster) hostNamed(name string) host {
	for _, h := range c.Hosts {
		if h.Name == name {
			return h
		}
	}
	return host{}
}

// printHosts lists the hosts and their tasks.
func (c *testCluster) printHosts(w io.Writer) {
	fmt.Fprintf(w, "cluster %s: %d hosts on %s, each a network namespace whose %s is a port of a bridge in %s; state in %s\n",
		c.Name, len(c.Hosts), c.Subnet, vethnet.HostLink, vethnet.NSName(c.Name, "switch"), c.dir)
	for _, h := range c.Hosts {
		role := "serve " + h.task()
		if h.Job == "chief" {
			role = "chief (runs starwire train)"
		}
		fmt.Fprintf(w, "  %-8s %-22s %-15s %s\n", h.Name, h.NS, h.Addr, role)
	}
}

// trainHint is the command line that trains on an "up" cluster.
func (c *testCluster) trainHint() string {
	chief := c.hostNamed("chief")
	exe, err := os.Executable()
	if err != nil {
		exe = "starwire"
	}
	return fmt.Sprintf("cd %s && TF_CONFIG=\"$(cat tf_config)\" ip netns exec %s %s train", filepath.Join(c.dir, chief.Name), chief.NS, exe)
}

// teardown stops the cluster's processes and deletes its namespaces and
// state.
func (c *testCluster) teardown() error {
	var errs []error
	if err := c.stopTasks(); err != nil {
		errs = append(errs, err)
	}
	if _, err := removeCluster(filepath.Dir(c.dir), c.Name); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeCluster stops whatever runs in the namespaces of the cluster
// called name, deletes them and its state directory, and returns the
// namespaces it deleted.
func removeCluster(stateDir, name string) ([]string, error) {
	var errs []error
	nss, err := vethnet.SegmentNamespaces(name)
	if err != nil {
		errs = append(errs, err)
	}
	if err := stopNamespaces(nss); err != nil {
		errs = append(errs, err)
	}
	removed, err := vethnet.DeleteSegment(name)
	if err != nil {
		errs = append(errs, err)
	}
	dir := filepath.Join(stateDir, name)
	if _, err := os.Stat(dir); err == nil {
		if len(removed) == 0 {
			removed = []string{"(none left)"}
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	removeEmptyStateDir(stateDir)
	return removed, errors.Join(errs...)
}

// removeEmptyStateDir removes the default state directory (and root's
// /run/starwire) once no cluster is left in it, so that nothing stays
// behind after the last cluster is removed or a first one failed to
// build. A directory given with --state_dir is the user's, and stays.
func removeEmptyStateDir(stateDir string) {
	if stateDir != defaultStateDir {
		return
	}
	if os.Remove(stateDir) == nil && filepath.Base(filepath.Dir(stateDir)) == "starwire" {
		os.Remove(filepath.Dir(stateDir)) // fails, as it should, while not empty
	}
}

// stopGrace is how long a task has to stop after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// stopNamespaces ends every process in the namespaces: SIGTERM, and
// SIGKILL for those still there after stopGrace.
func stopNamespaces(nss []string) error {
	pids := func() []int {
		var all []int
		for _, ns := range nss {
			p, _ := netns.Pids(ns)
			all = append(all, p...)
		}
		return all
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		left := pids()
		if len(left) == 0 {
			return nil
		}
		for _, pid := range left {
			syscall.Kill(pid, sig)
		}
		deadline := time.Now().Add(stopGrace)
		for len(pids()) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if left := pids(); len(left) > 0 {
		return fmt.Errorf("processes %v outlived SIGKILL in the cluster's namespaces", left)
	}
	return nil
}

// sweepAbandoned removes the clusters whose "run" process died (killed
// before it could remove them).
func sweepAbandoned(stateDir string, w io.Writer) {
	ents, err := os.ReadDir(stateDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		c, err := loadCluster(stateDir, e.Name())
		if err != nil || c.Owner == 0 || c.Owner == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(c.Owner)); err == nil {
			continue
		}
		if removed, err := removeCluster(stateDir, c.Name); err == nil {
			fmt.Fprintf(w, "removed cluster %s, abandoned by process %d: %s\n", c.Name, c.Owner, strings.Join(removed, " "))
		}
	}
}
