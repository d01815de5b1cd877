package clustercmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/internal/vethnet"
	"github.com/starwire/starwire/rpc/cluster"
)

// Env lists the variables the cluster command reads: it passes the knobs
// to its tasks, and gives them TF_CONFIG and the endpoint map itself.
var Env = []string{cluster.EnvCoreNumber, cluster.EnvPSCoreNumber, cluster.EnvWorkerCoreNumber,
	cluster.EnvPSPolling, cluster.EnvWorkerPolling, cluster.EnvPSDisablePin, cluster.EnvWorkerDisablePin}

// Run runs "starwire cluster" with args: it builds a cluster of test hosts on this machine, each a
// network namespace on one bridge, and runs a task of it in each: "up"
// leaves one running under a name, "down" removes it, "run" makes one,
// trains on it over AF_XDP and over TCP, reports and removes it.
func Run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		flags.PrintEnv(stdout, Env)
		if len(args) == 0 {
			return flags.Usagef("cluster: give up, down, run, endpoints or manifests")
		}
		return nil
	}
	switch args[0] {
	case "up":
		return up(ctx, args[1:], stdout)
	case "down":
		return down(args[1:], stdout)
	case "run":
		return run(ctx, args[1:], stdout)
	case "endpoints":
		return endpoints(ctx, args[1:], stdout)
	case "manifests":
		return manifests(ctx, args[1:], stdout)
	}
	return flags.Usagef("cluster: unknown subcommand %q (want up, down, run, endpoints or manifests)", args[0])
}

const usage = `usage: starwire cluster up|down|run|endpoints|manifests [flags] [-- train flags]

  up    build the hosts (network namespaces on a bridge, 198.18.0.0/15) and
        start "starwire serve" in each; they run until "down"
  down  stop a cluster's tasks and delete its namespaces and links
  run   build a cluster, train on it over each of --paths, report each task's
        path and traffic, and remove everything, even when stopped or failing;
        flags after "--" go to "starwire train" (such as --steps 200)
  endpoints  write the .endpoint_map of TF_CONFIG's cluster (Kubernetes' init step)
  manifests  print Kubernetes manifests: per task a headless Service and a Pod,
        with TF_CONFIG as Kubeflow's TFJob sets it

run "starwire cluster <subcommand> -h" for its flags; up, down and run need root
(CAP_NET_ADMIN, CAP_SYS_ADMIN; CAP_BPF and CAP_IPC_LOCK for AF_XDP); the
tasks it starts read the variables below from its environment
`

// shapeFlags say what cluster to build.
type shapeFlags struct {
	name     string
	ps       int
	workers  int
	subnet   string
	stateDir string
	protocol string
	prefix   netip.Prefix
}

// benchmarkNet is the block test hosts take their addresses from
// (RFC 2544's, never routed).
var benchmarkNet = netip.MustParsePrefix("198.18.0.0/15")

func (s *shapeFlags) register(fs *flag.FlagSet, name string) {
	fs.StringVar(&s.name, "name", name, "the cluster's name: its namespaces are swc-<name>-<host>")
	fs.IntVar(&s.ps, "ps", 2, "parameter-server hosts")
	fs.IntVar(&s.workers, "workers", 2, "worker hosts")
	fs.StringVar(&s.subnet, "subnet", "198.18.0.0/24", "the hosts' addresses, within 198.18.0.0/15: ps first, then workers, then the chief")
	fs.StringVar(&s.stateDir, "state_dir", defaultStateDir, "where a cluster's state, each host's .endpoint_map and the tasks' logs are kept")
	fs.StringVar(&s.protocol, "protocol", "grpc+seastar", `the tasks' protocol, "grpc+seastar" or "grpc"`)
}

// check validates the flags; cmd names the subcommand in errors.
func (s *shapeFlags) check(cmd string) error {
	if err := vethnet.CheckName(s.name); err != nil {
		return flags.Usagef("%s: --name: %v", cmd, strings.TrimPrefix(err.Error(), "vethnet: "))
	}
	if s.ps < 1 || s.workers < 1 {
		return flags.Usagef("%s: --ps %d --workers %d: want at least one of each", cmd, s.ps, s.workers)
	}
	p, err := netip.ParsePrefix(s.subnet)
	if err != nil || !p.Addr().Is4() || !benchmarkNet.Overlaps(p) || p.Bits() < benchmarkNet.Bits() || p.Bits() > 30 {
		return flags.Usagef("%s: --subnet %q: want an IPv4 prefix within %v, /30 or wider", cmd, s.subnet, benchmarkNet)
	}
	s.prefix = p.Masked()
	if n := 1<<(32-s.prefix.Bits()) - 2; s.ps+s.workers+1 > n {
		return flags.Usagef("%s: %d ps, %d workers and a chief do not fit in %v", cmd, s.ps, s.workers, s.prefix)
	}
	if s.protocol != "grpc+seastar" && s.protocol != "grpc" {
		return flags.Usagef("%s: --protocol %q: want grpc+seastar or grpc", cmd, s.protocol)
	}
	return nil
}

// up builds a named cluster and starts its tasks, which outlive
// the command.
func up(ctx context.Context, args []string, stdout io.Writer) error {
	var s shapeFlags
	var afxdp flags.AFXDP
	fs := flag.NewFlagSet("cluster up", flag.ContinueOnError)
	s.register(fs, "")
	flags.RegisterAFXDP(fs, &afxdp, flags.AFXDPAuto, "serve the tasks' calls to each other over AF_XDP on each host's eth0")
	if err := flags.Parse(fs, args, stdout, nil); err != nil {
		return err
	}
	if s.name == "" {
		return flags.Usagef("cluster up: --name is required")
	}
	if err := s.check("cluster up"); err != nil {
		return err
	}
	sweepAbandoned(s.stateDir, stdout)
	c, err := buildCluster(s, 0)
	if err != nil {
		return fmt.Errorf("cluster up: %w", err)
	}
	if err := c.start(ctx, afxdp, true); err != nil {
		return fmt.Errorf("cluster up: %w", errorsJoin(err, c.teardown()))
	}
	c.printHosts(stdout)
	fmt.Fprintf(stdout, "train on it:  %s\n", c.trainHint())
	fmt.Fprintf(stdout, "remove it:    %s\n", downCommand(c.Name, s.stateDir))
	return nil
}

// downCommand is the command that removes cluster name kept in stateDir:
// a hint that leaves out a --state_dir the cluster was made with finds no
// cluster to remove, and following it loops.
func downCommand(name, stateDir string) string {
	cmd := "starwire cluster down --name " + name
	if stateDir != defaultStateDir {
		cmd += " --state_dir " + stateDir
	}
	return cmd
}

// down stops a cluster's tasks and deletes its namespaces.
func down(args []string, stdout io.Writer) error {
	var name, stateDir string
	fs := flag.NewFlagSet("cluster down", flag.ContinueOnError)
	fs.StringVar(&name, "name", "", "the cluster to remove")
	fs.StringVar(&stateDir, "state_dir", defaultStateDir, "where the cluster's state is kept")
	if err := flags.Parse(fs, args, stdout, nil); err != nil {
		return err
	}
	if err := vethnet.CheckName(name); err != nil {
		return flags.Usagef("cluster down: --name: %v", strings.TrimPrefix(err.Error(), "vethnet: "))
	}
	sweepAbandoned(stateDir, stdout)
	removed, err := removeCluster(stateDir, name)
	if err != nil {
		return fmt.Errorf("cluster down: %w", err)
	}
	if len(removed) == 0 {
		return fmt.Errorf("cluster down: no cluster %q (no state in %s, no namespaces %s)", name, stateDir, vethnet.NSName(name, "*"))
	}
	fmt.Fprintf(stdout, "cluster %s removed: namespaces %s\n", name, strings.Join(removed, " "))
	return nil
}

// errorsJoin is errors.Join, keeping a lone error as it is.
func errorsJoin(err, more error) error {
	if more == nil {
		return err
	}
	return fmt.Errorf("%w (and removing it: %v)", err, more)
}

// defaultStateDir keeps clusters' state where root's runtime files go.
var defaultStateDir = func() string {
	if os.Geteuid() == 0 {
		return "/run/starwire/cluster"
	}
	return os.TempDir() + "/starwire-cluster"
}()
