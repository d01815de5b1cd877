package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"

	"github.com/starwire/starwire/afxdp"
	"github.com/starwire/starwire/cmd/starwire/internal/tasks"
	"github.com/starwire/starwire/rpc/cluster"
)

// serveCmd runs one task until interrupted.
func serveCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var cf clusterFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	job := fs.String("job", "", `the task's job, "ps" or "worker" (default TF_CONFIG's task type)`)
	index := fs.Int("task", 0, "the task's index in its job (default TF_CONFIG's task index)")
	ps := fs.Int("ps", 0, "with --registry_dir: the cluster's parameter-server tasks")
	workers := fs.Int("workers", 0, "with --registry_dir: the cluster's worker tasks")
	host := fs.String("host", "127.0.0.1", "with --registry_dir: the address to bind and publish")
	iface := fs.String("afxdp_iface", "", "carry this task's calls to its peers over AF_XDP on this interface, whose address is the task's starwire host (every task must)")
	transport := fs.String("transport", "tcp", `starwire transport under grpc+seastar: "tcp", or "udp" (afxdp's packet protocol on kernel UDP); the same in every process`)
	cf.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	cfg, haveTF, err := cluster.LoadTFConfig()
	if err != nil {
		return usagef("serve: %v", err)
	}
	if !set["job"] && haveTF {
		*job = cfg.TaskType
		if !set["task"] {
			*index = cfg.TaskIndex
		}
	}
	if *job == "" {
		return usagef("serve: --job is required (or TF_CONFIG's task)")
	}
	if *index < 0 {
		return usagef("serve: --task %d, want >= 0", *index)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tr, err := chooseTransport(*transport)
	if err != nil {
		return err
	}
	task := cluster.TaskName(*job, *index)

	var s *tasks.Server
	var layout tasks.Layout
	if cf.registryDir != "" {
		if set["cluster"] {
			return usagef("serve: --cluster and --registry_dir both name the cluster; give one")
		}
		want := map[string]int{"ps": *ps, "worker": *workers}
		if n, ok := want[*job]; !ok || *index >= n {
			return usagef("serve: task %s is not in a cluster of --ps %d and --workers %d", task, *ps, *workers)
		}
		proto, err := cluster.ParseProtocol(cf.protocol)
		if err != nil {
			return usagef("serve: %v", err)
		}
		bind := net.JoinHostPort(*host, "0")
		if s, err = tasks.Listen(*job, *index, bind, bind, proto.UsesStar(), tr.net); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer s.Close()
		addrs := map[string]string{cluster.AddrGRPC: s.GRPCAddr}
		if s.StarAddr != "" {
			addrs[cluster.AddrStar] = s.StarAddr
		}
		if err := cluster.Register(cf.registryDir, *job, *index, addrs); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		fmt.Fprintf(stdout, "%s registered grpc %s star %s in %s; waiting for the cluster\n", task, s.GRPCAddr, orNone(s.StarAddr), cf.registryDir)
		if layout, _, err = cf.layout(ctx, set, *ps, *workers); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		layout.Protocol = proto
	} else {
		var joined bool
		if layout, joined, err = cf.layout(ctx, set, 0, 0); err != nil {
			return err
		}
		if !joined {
			return usagef("serve: give the cluster with --cluster, TF_CONFIG or --registry_dir")
		}
		grpcAddr, err := layout.Cluster.Lookup(*job, *index)
		if err != nil {
			return usagef("serve: %v", err)
		}
		var starAddr string
		if layout.Protocol.UsesStar() {
			if starAddr, err = layout.Endpoints.StarAddr(layout.Cluster, *job, *index); err != nil {
				return usagef("serve: %v", err)
			}
		}
		if s, err = tasks.Listen(*job, *index, bindAddr(grpcAddr), bindAddr(starAddr), layout.Protocol.UsesStar(), tr.net); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer s.Close()
	}
	tr.fallback = afxdpFallback(noIfaceGiven)
	peerLine := transportName(layout.Protocol, tr)
	if *iface != "" {
		err := s.ServeAFXDP(*iface)
		switch {
		case err == nil:
			peerLine = "starwire over " + s.PeerTransport
		case errors.Is(err, afxdp.ErrUnavailable):
			peerLine += "; AF_XDP on " + *iface + " unavailable: " + err.Error()
		default:
			return fmt.Errorf("serve: %w", err)
		}
	}
	if err := s.Start(layout, logger); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(stdout, "%s serving: grpc %s, starwire %s (%s), protocol %s; peer calls over %s; cluster %s\n",
		task, s.GRPCAddr, orNone(s.StarAddr), tr.net.Name(), layout.Protocol, peerLine, layout.Cluster)
	<-ctx.Done()
	calls, bytes := s.PeerStats()
	fmt.Fprintf(stdout, "%s stopping: %d calls to peers (%.1f MB) over %s\n", task, calls, float64(bytes)/1e6, peerLine)
	return nil
}

// bindAddr listens on every interface at an address's port when its host
// is a name rather than an IP, as a cluster spec's hostnames are.
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

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
