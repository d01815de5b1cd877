package clustercmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/rpc/cluster"
)

// endpoints writes the endpoint map of TF_CONFIG's cluster: each
// task's starwire address is its gRPC address's host at the gRPC port plus
// --port_offset. With --resolve the host is resolved to its IPv4 address,
// waiting for it to appear in DNS: AF_XDP needs the address of the
// interface the task serves on, not a name (a pod's DNS name resolves to
// its IP once the pod has one). This is the init step of the Kubernetes
// manifests.
func endpoints(ctx context.Context, args []string, stdout io.Writer) error {
	var out string
	var offset int
	var resolve bool
	var wait time.Duration
	fs := flag.NewFlagSet("cluster endpoints", flag.ContinueOnError)
	fs.StringVar(&out, "out", cluster.DefaultEndpointMapFile, "the endpoint map file to write")
	fs.IntVar(&offset, "port_offset", 1, "a task's starwire port is its gRPC port plus this")
	fs.BoolVar(&resolve, "resolve", false, "map to each host's IPv4 address rather than its name (what AF_XDP needs)")
	fs.DurationVar(&wait, "wait", 5*time.Minute, "with --resolve: how long to wait for every name to resolve")
	if err := flags.Parse(fs, args, stdout, nil); err != nil {
		return err
	}
	cfg, ok, err := cluster.LoadTFConfig()
	if err != nil {
		return flags.Usagef("cluster endpoints: %v", err)
	}
	if !ok || cfg.Cluster.Len() == 0 {
		return flags.Usagef("cluster endpoints: TF_CONFIG gives no cluster")
	}
	if offset == 0 || offset < -65535 || offset > 65535 {
		return flags.Usagef("cluster endpoints: --port_offset %d: want a non-zero port difference", offset)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	m, err := endpointsOf(ctx, cfg.Cluster, offset, resolve)
	if err != nil {
		return fmt.Errorf("cluster endpoints: %w", err)
	}
	if err := writeEndpointMap(out, m); err != nil {
		return fmt.Errorf("cluster endpoints: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %d tasks' starwire addresses to %s\n", m.Len(), out)
	return nil
}

// endpointsOf computes the endpoint map of spec.
func endpointsOf(ctx context.Context, spec cluster.Spec, offset int, resolve bool) (cluster.EndpointMap, error) {
	m := cluster.NewEndpointMap("TF_CONFIG's cluster")
	for _, job := range spec.Jobs() {
		for _, i := range spec.TaskIndices(job) {
			addr, _ := spec.Lookup(job, i)
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return m, err
			}
			p, err := strconv.Atoi(port)
			if err != nil || p+offset < 1 || p+offset > 65535 {
				return m, fmt.Errorf("%s: port %s plus %d is not a port", cluster.TaskName(job, i), port, offset)
			}
			if resolve {
				if host, err = resolveIPv4(ctx, host); err != nil {
					return m, fmt.Errorf("%s: %w", cluster.TaskName(job, i), err)
				}
			}
			if err := m.Add(addr, net.JoinHostPort(host, strconv.Itoa(p+offset))); err != nil {
				return m, err
			}
		}
	}
	return m, nil
}

// resolveIPv4 returns host's first IPv4 address, asking again every second
// until ctx ends: a pod's name resolves only once the pod has an address.
func resolveIPv4(ctx context.Context, host string) (string, error) {
	if ip := net.ParseIP(host); ip != nil {
		return host, nil
	}
	var last error
	for {
		ips, err := net.DefaultResolver.LookupIP(ctx, "ip4", host)
		if err == nil && len(ips) > 0 {
			return ips[0].String(), nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not resolve (%v): %w", host, last, context.Cause(ctx))
		case <-time.After(time.Second):
		}
	}
}

// writeEndpointMap writes m to path whole or not at all.
func writeEndpointMap(path string, m cluster.EndpointMap) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".endpoint_map.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	fmt.Fprintf(tmp, "# written by \"starwire cluster endpoints\" from TF_CONFIG\n")
	if _, err := m.WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
