package tasks

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// WorkerServiceName is the WorkerService's name in health checks, as
// gRPC's reflection and health probes name it.
const WorkerServiceName = "tensorflow.WorkerService"

// StarHealth is the starwire method that answers a grpc.health.v1
// HealthCheckRequest (the metadata) with a HealthCheckResponse, from the
// same health state as the gRPC port's grpc.health.v1.Health/Check, so
// that the starwire port can be probed too (starwire health --starwire).
var StarHealth = rpc.NewMethod("grpc.health.v1.Health/Check")

// newHealth returns the task's health state: NOT_SERVING until Start has
// its servers serving.
func newHealth() *health.Server {
	h := health.NewServer()
	h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	h.SetServingStatus(WorkerServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	return h
}

// registerProbes puts the health service and server reflection on the
// task's gRPC server, so that grpc-health-probe, Kubernetes' gRPC probes
// and grpcurl work without proto files, and the health check on its
// starwire server.
func (s *Server) registerProbes(g *grpc.Server, star *rpc.Server) {
	healthpb.RegisterHealthServer(g, s.health)
	reflection.Register(g)
	if star != nil {
		star.Register(StarHealth, rpc.HandleProto(s.checkHealth), rpc.HandlerOptions{Inline: true})
	}
}

// checkHealth answers StarHealth, with gRPC's status codes as TensorFlow's
// (they are the same numbers).
func (s *Server) checkHealth(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	resp, err := s.health.Check(ctx, req)
	if err != nil {
		st := status.Convert(err)
		return nil, rpc.Errorf(wire.Code(st.Code()), "%s", st.Message())
	}
	return resp, nil
}

// setServing marks the task and its WorkerService serving or not.
func (s *Server) setServing(serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", st)
	s.health.SetServingStatus(WorkerServiceName, st)
}

// Drain marks the task NOT_SERVING on both ports, so that probes and load
// balancers stop sending it work, while it keeps answering calls. Close
// drains first.
func (s *Server) Drain() { s.health.Shutdown() }
