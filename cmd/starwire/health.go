package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/starwire/starwire/cmd/starwire/internal/flags"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/tasks"
)

// healthCmd probes a task, as Kubernetes' exec probes or an operator
// would: the standard gRPC health service on its gRPC port, or with
// --starwire the same check on its starwire port. It prints the status and
// succeeds only when it is SERVING.
func healthCmd(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	addr := fs.String("addr", "", "the task's address: its gRPC address, or with --starwire its starwire address")
	star := fs.Bool("starwire", false, "probe the starwire port instead of the gRPC port")
	service := fs.String("service", "", `the service to check: "" for the task, or "`+tasks.WorkerServiceName+`"`)
	timeout := fs.Duration("timeout", time.Second, "how long to wait for the answer")
	var tf flags.TLS
	tf.Register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	files, err := tf.Get()
	if err != nil {
		return flags.PrefixUsage("health", err)
	}
	if *addr == "" {
		return flags.Usagef("health: --addr is required")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req := &healthpb.HealthCheckRequest{Service: *service}
	var resp *healthpb.HealthCheckResponse
	layout := tasks.Layout{TLS: files}
	if *star {
		resp, err = checkStar(ctx, *addr, layout, req)
	} else {
		resp, err = checkGRPC(ctx, *addr, layout, req)
	}
	if err != nil {
		return fmt.Errorf("health: %s: %w%s", *addr, err, otherPortHint(*addr, *star, layout, *timeout))
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health: %s: %v", *addr, resp.GetStatus())
	}
	fmt.Fprintln(stdout, resp.GetStatus())
	return nil
}

func checkGRPC(ctx context.Context, addr string, l tasks.Layout, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	opts, err := l.GRPCDialOptions()
	if err != nil {
		return nil, err
	}
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	return healthpb.NewHealthClient(cc).Check(ctx, req)
}

func checkStar(ctx context.Context, addr string, l tasks.Layout, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	tr, _, err := tasks.TCPNet{TLS: l.TLS}.Dialer()
	if err != nil {
		return nil, err
	}
	c := rpc.NewClient(addr, rpc.ClientOptions{Name: addr, Transport: tr})
	defer c.Close()
	resp := new(healthpb.HealthCheckResponse)
	if err := c.CallProto(ctx, tasks.StarHealth, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// otherPortHint asks the task at addr over the other of its two protocols
// and, when it answers there, says which flag probes it: the gRPC and
// starwire ports are easy to mix up, and a probe in the wrong protocol
// gets no answer it can tell apart from a task that is not there.
func otherPortHint(addr string, star bool, l tasks.Layout, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), min(timeout, time.Second))
	defer cancel()
	req := &healthpb.HealthCheckRequest{}
	if star {
		if _, err := checkGRPC(ctx, addr, l, req); err == nil {
			return "; " + addr + " answers as a task's gRPC port: probe it without --starwire"
		}
		return ""
	}
	if _, err := checkStar(ctx, addr, l, req); err == nil {
		return "; " + addr + " answers as a task's starwire port: probe it with --starwire"
	}
	return ""
}
