package driver

import (
	"context"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Caller carries WorkerService calls to one task, a master's and a
// worker's alike: the master's typed methods, and handlers.Caller's Call,
// which a worker's calls to its peers take (a remote _Recv's RecvTensor,
// in starwire's encoding), so that a task's Resolver hands out the same
// Callers and their traffic is counted with the rest. The two
// implementations are handlers.StarCaller (starwire: protobuf metadata,
// tensors as raw segments) and handlers.GRPCCaller (gRPC: tensors inside
// TensorProto). No method changes the request it is given. Safe for
// concurrent use.
type Caller interface {
	handlers.Caller
	// Task returns the name of the task called, "/job:ps/replica:0/task:0".
	Task() string
	GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error)
	CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) error
	DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) error
	RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error)
	DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) error
	// RunGraph runs req with feeds as its send entries (req.Send must be
	// empty) and places the tensors fetched for req.RecvKey in out, in
	// that order.
	RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []handlers.Feed, out *handlers.Fetched) error
	CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error
	// RecvTensor fetches one rendezvous key's tensor into out.
	RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest, out *handlers.Fetched) error
	// Stats returns the calls made so far and the bytes they moved.
	Stats() handlers.Stats
	Close() error
}

// Both of handlers' clients carry a master's calls and a worker's to its
// peers.
var (
	_ Caller = (*handlers.StarCaller)(nil)
	_ Caller = (*handlers.GRPCCaller)(nil)
)
