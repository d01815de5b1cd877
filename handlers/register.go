package handlers

import (
	"context"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Register puts every WorkerService method, through the generated
// RegisterWorkerServiceStarwireServer, and FuseRecvTensor on srv. Methods
// that answer at once run inline on the connection's goroutine; RunGraph,
// FuseRecvTensor, CompleteGroup and CompleteInstance, which wait, and
// RegisterGraph and CleanupAll, which may take a while, run on goroutines
// of their own. RecvTensor runs inline too and, when its tensor has not
// been sent yet, leaves its answer to the Send (see handleRecvTensor).
func (w *Worker) Register(srv *rpc.Server) {
	RegisterWorkerServiceStarwireServer(srv, starwireService{w}, handlerOptions)
	srv.Register(MethodFuseRecvTensor, w.handleFuseRecvTensor, rpc.HandlerOptions{})
}

// handlerOptions says which methods run inline.
func handlerOptions(m rpc.Method) rpc.HandlerOptions {
	switch m.ID {
	// Building a graph is quick (no I/O, no waiting), but can be large;
	// it runs off the connection's goroutine so it does not delay others.
	// CleanupAll waits for each variable's lock, which steps may hold.
	case MethodRegisterGraph.ID, MethodRunGraph.ID, MethodCleanupAll.ID,
		MethodCompleteGroup.ID, MethodCompleteInstance.ID:
		return rpc.HandlerOptions{}
	case MethodRecvTensor.ID:
		// It answers at once or defers its answer to the tensor's Send.
		return rpc.HandlerOptions{Deferrable: true}
	}
	return rpc.HandlerOptions{Inline: true}
}

// starwireService serves a Worker as the generated WorkerServiceStarwireServer.
type starwireService struct{ w *Worker }

var _ WorkerServiceStarwireServer = starwireService{}

func (s starwireService) GetStatus(context.Context, *tfpb.GetStatusRequest) (*tfpb.GetStatusResponse, error) {
	return s.w.getStatus(), nil
}

func (s starwireService) CreateWorkerSession(_ context.Context, req *tfpb.CreateWorkerSessionRequest) (*tfpb.CreateWorkerSessionResponse, error) {
	return s.w.createWorkerSession(req)
}

func (s starwireService) DeleteWorkerSession(_ context.Context, req *tfpb.DeleteWorkerSessionRequest) (*tfpb.DeleteWorkerSessionResponse, error) {
	return s.w.deleteWorkerSession(req)
}

func (s starwireService) RegisterGraph(_ context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	return s.w.registerGraph(req)
}

func (s starwireService) DeregisterGraph(_ context.Context, req *tfpb.DeregisterGraphRequest) (*tfpb.DeregisterGraphResponse, error) {
	return s.w.deregisterGraph(req)
}

func (s starwireService) RunGraph(ctx context.Context, in *wire.Inbound, out *rpc.Response) error {
	return s.w.handleRunGraph(ctx, in, out)
}

func (s starwireService) CleanupGraph(_ context.Context, req *tfpb.CleanupGraphRequest) (*tfpb.CleanupGraphResponse, error) {
	return s.w.cleanupGraph(req), nil
}

func (s starwireService) CleanupAll(_ context.Context, req *tfpb.CleanupAllRequest) (*tfpb.CleanupAllResponse, error) {
	return s.w.cleanupAll(req), nil
}

func (s starwireService) RecvTensor(ctx context.Context, in *wire.Inbound, out *rpc.Response) error {
	return s.w.handleRecvTensor(ctx, in, out)
}

func (s starwireService) Logging(_ context.Context, req *tfpb.LoggingRequest) (*tfpb.LoggingResponse, error) {
	return s.w.logging(req), nil
}

func (s starwireService) Tracing(_ context.Context, req *tfpb.TracingRequest) (*tfpb.TracingResponse, error) {
	return s.w.tracing(req)
}

func (s starwireService) RecvBuf(_ context.Context, req *tfpb.RecvBufRequest) (*tfpb.RecvBufResponse, error) {
	return s.w.recvBuf(req)
}

func (s starwireService) GetStepSequence(_ context.Context, req *tfpb.GetStepSequenceRequest) (*tfpb.GetStepSequenceResponse, error) {
	return s.w.getStepSequence(req), nil
}

func (s starwireService) CompleteGroup(ctx context.Context, req *tfpb.CompleteGroupRequest) (*tfpb.CompleteGroupResponse, error) {
	return s.w.completeGroup(ctx, req)
}

func (s starwireService) CompleteInstance(ctx context.Context, req *tfpb.CompleteInstanceRequest) (*tfpb.CompleteInstanceResponse, error) {
	return s.w.completeInstance(ctx, req)
}

func (s starwireService) MarkRecvFinished(_ context.Context, req *tfpb.MarkRecvFinishedRequest) (*tfpb.MarkRecvFinishedResponse, error) {
	return s.w.markRecvFinished(req), nil
}
