package tasks

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/rpc/tcp"
)

// TestProbes: a task answers the standard gRPC health service and server
// reflection on its gRPC port, and the same health check on its starwire
// port; both say SERVING once it has started and NOT_SERVING once it
// drains.
func TestProbes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := StartLocal(LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar, Dir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := l.Servers[0]
	cc, err := grpc.NewClient(s.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	star := rpc.NewClient(s.StarAddr, rpc.ClientOptions{Transport: &tcp.Transport{}, Name: s.Task()})
	defer star.Close()
	hc := healthpb.NewHealthClient(cc)
	check := func(service string) (grpcStatus, starStatus healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("gRPC health check of %q: %v", service, err)
		}
		var sr healthpb.HealthCheckResponse
		if err := star.CallProto(ctx, StarHealth, &healthpb.HealthCheckRequest{Service: service}, &sr); err != nil {
			t.Fatalf("starwire health check of %q: %v", service, err)
		}
		return r.GetStatus(), sr.GetStatus()
	}
	for _, service := range []string{"", WorkerServiceName} {
		if g, st := check(service); g != healthpb.HealthCheckResponse_SERVING || st != g {
			t.Errorf("started: %q is %v over gRPC, %v over starwire; want SERVING", service, g, st)
		}
	}
	_, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "no.such.Service"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown service over gRPC: %v, want NotFound", err)
	}
	var sr healthpb.HealthCheckResponse
	err = star.CallProto(ctx, StarHealth, &healthpb.HealthCheckRequest{Service: "no.such.Service"}, &sr)
	var st *rpc.Status
	if !errors.As(err, &st) || int(st.Code) != int(codes.NotFound) {
		t.Errorf("unknown service over starwire: %v, want NOT_FOUND", err)
	}

	// Reflection lists the services without proto files, and describes
	// the task's own.
	rc, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sv := range resp.GetListServicesResponse().GetService() {
		names = append(names, sv.GetName())
	}
	for _, want := range []string{"grpc.health.v1.Health", WorkerServiceName, "starwire.TaskInfo", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	for _, symbol := range []string{"starwire.TaskInfo", WorkerServiceName} {
		if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol}}); err != nil {
			t.Fatal(err)
		}
		resp, err := rc.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
			t.Errorf("reflection has no file for %s: %v", symbol, resp.GetErrorResponse())
		}
	}
	rc.CloseSend()

	s.Drain()
	for _, service := range []string{"", WorkerServiceName} {
		if g, st := check(service); g != healthpb.HealthCheckResponse_NOT_SERVING || st != g {
			t.Errorf("draining: %q is %v over gRPC, %v over starwire; want NOT_SERVING", service, g, st)
		}
	}
}
