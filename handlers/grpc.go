package handlers

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// GRPCService returns the worker as a gRPC WorkerService; register it with
// tfpb.RegisterWorkerServiceServer. Tensors travel in
// TensorProto.tensor_content, as TensorFlow's gRPC runtime expects. Like
// TensorFlow, serve it with gRPC's message size limits raised
// (grpc.MaxRecvMsgSize, grpc.MaxSendMsgSize): tensors exceed the 4 MiB
// default.
func (w *Worker) GRPCService() tfpb.WorkerServiceServer { return &grpcService{w: w} }

type grpcService struct {
	tfpb.UnimplementedWorkerServiceServer
	w *Worker
}

// grpcError turns a worker error into a gRPC status with the same code.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	return grpcstatus.Error(codes.Code(status.CodeOf(err)), statusMessage(err))
}

// statusMessage is err's message without its code's name, which travels
// apart as the code: the context wrapping a status.Status, then the status's
// message, as TensorFlow's messages read and as the starwire server sends
// them.
func statusMessage(err error) string {
	msg := err.Error()
	var st *status.Status
	if errors.As(err, &st) {
		msg = strings.Replace(msg, st.Error(), st.Msg, 1)
	}
	return msg
}

// grpcResult passes a worker method's answer on, with its error as a gRPC
// status.
func grpcResult[Resp any](resp Resp, err error) (Resp, error) { return resp, grpcError(err) }

// The methods below implement tfpb.WorkerServiceServer over the worker's
// transport-neutral methods.

func (g *grpcService) GetStatus(context.Context, *tfpb.GetStatusRequest) (*tfpb.GetStatusResponse, error) {
	return g.w.getStatus(), nil
}

func (g *grpcService) CreateWorkerSession(_ context.Context, req *tfpb.CreateWorkerSessionRequest) (*tfpb.CreateWorkerSessionResponse, error) {
	return grpcResult(g.w.createWorkerSession(req))
}

func (g *grpcService) DeleteWorkerSession(_ context.Context, req *tfpb.DeleteWorkerSessionRequest) (*tfpb.DeleteWorkerSessionResponse, error) {
	return grpcResult(g.w.deleteWorkerSession(req))
}

func (g *grpcService) RegisterGraph(_ context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	return grpcResult(g.w.registerGraph(req))
}

func (g *grpcService) DeregisterGraph(_ context.Context, req *tfpb.DeregisterGraphRequest) (*tfpb.DeregisterGraphResponse, error) {
	return grpcResult(g.w.deregisterGraph(req))
}

// RunGraph answers every failure after the request is decoded through
// runGraphFailed, so that store_errors_in_response_body covers them all.
func (g *grpcService) RunGraph(ctx context.Context, req *tfpb.RunGraphRequest) (*tfpb.RunGraphResponse, error) {
	feeds, err := decodeSends(req)
	if err != nil {
		return grpcResult(runGraphFailed(req, err))
	}
	resp, fetches, err := g.w.runGraph(ctx, req, feeds)
	tensor.ReleaseAll(feeds)
	if err != nil {
		return nil, grpcError(err)
	}
	defer tensor.ReleaseAll(fetches)
	if err := fetchesToProto(resp, fetches); err != nil {
		return grpcResult(runGraphFailed(req, err))
	}
	return resp, nil
}

// fetchesToProto puts the fetched tensors into resp's recv entries, which
// name them in order.
func fetchesToProto(resp *tfpb.RunGraphResponse, fetches []wire.Tensor) error {
	for i := range fetches {
		p, err := tensor.ToProto(&fetches[i])
		if err != nil {
			return status.Errorf(wire.Internal, "RunGraph: recv %q: %v", resp.Recv[i].GetName(), err)
		}
		resp.Recv[i].Tensor = p
	}
	return nil
}

func (g *grpcService) CleanupGraph(_ context.Context, req *tfpb.CleanupGraphRequest) (*tfpb.CleanupGraphResponse, error) {
	return g.w.cleanupGraph(req), nil
}

func (g *grpcService) CleanupAll(_ context.Context, req *tfpb.CleanupAllRequest) (*tfpb.CleanupAllResponse, error) {
	return g.w.cleanupAll(req), nil
}

func (g *grpcService) RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest) (*tfpb.RecvTensorResponse, error) {
	t, start, err := g.w.recvTensor(ctx, req.GetStepId(), req.GetRendezvousKey())
	if err != nil {
		return nil, grpcError(err)
	}
	defer t.Buf.Release()
	p, err := tensor.ToProto(&t)
	if err != nil {
		return nil, grpcError(status.Errorf(wire.Internal, "RecvTensor: %v", err))
	}
	return &tfpb.RecvTensorResponse{Tensor: p, IsDead: t.Dead, SendStartMicros: start}, nil
}

func (g *grpcService) Logging(_ context.Context, req *tfpb.LoggingRequest) (*tfpb.LoggingResponse, error) {
	return g.w.logging(req), nil
}

func (g *grpcService) Tracing(_ context.Context, req *tfpb.TracingRequest) (*tfpb.TracingResponse, error) {
	return grpcResult(g.w.tracing(req))
}

func (g *grpcService) RecvBuf(_ context.Context, req *tfpb.RecvBufRequest) (*tfpb.RecvBufResponse, error) {
	return grpcResult(g.w.recvBuf(req))
}

func (g *grpcService) GetStepSequence(_ context.Context, req *tfpb.GetStepSequenceRequest) (*tfpb.GetStepSequenceResponse, error) {
	return g.w.getStepSequence(req), nil
}

func (g *grpcService) CompleteGroup(ctx context.Context, req *tfpb.CompleteGroupRequest) (*tfpb.CompleteGroupResponse, error) {
	return grpcResult(g.w.completeGroup(ctx, req))
}

func (g *grpcService) CompleteInstance(ctx context.Context, req *tfpb.CompleteInstanceRequest) (*tfpb.CompleteInstanceResponse, error) {
	return grpcResult(g.w.completeInstance(ctx, req))
}

func (g *grpcService) MarkRecvFinished(_ context.Context, req *tfpb.MarkRecvFinishedRequest) (*tfpb.MarkRecvFinishedResponse, error) {
	return g.w.markRecvFinished(req), nil
}
