package handlers

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Register puts every WorkerService method, and FuseRecvTensor, on srv.
// Methods that answer at once run inline on the connection's goroutine;
// RunGraph, RecvTensor, FuseRecvTensor, CompleteGroup and CompleteInstance,
// which wait, and RegisterGraph and CleanupAll, which may take a while, run
// on goroutines of their own.
func (w *Worker) Register(srv *rpc.Server) {
	inline := rpc.HandlerOptions{Inline: true}
	blocking := rpc.HandlerOptions{}
	srv.Register(MethodGetStatus, protoHandler(func(_ context.Context, _ *tfpb.GetStatusRequest) (*tfpb.GetStatusResponse, error) {
		return w.getStatus(), nil
	}), inline)
	srv.Register(MethodCreateWorkerSession, protoHandler(func(_ context.Context, req *tfpb.CreateWorkerSessionRequest) (*tfpb.CreateWorkerSessionResponse, error) {
		return w.createWorkerSession(req)
	}), inline)
	srv.Register(MethodDeleteWorkerSession, protoHandler(func(_ context.Context, req *tfpb.DeleteWorkerSessionRequest) (*tfpb.DeleteWorkerSessionResponse, error) {
		return w.deleteWorkerSession(req)
	}), inline)
	// Building a graph is quick (no I/O, no waiting), but can be large;
	// it runs off the connection's goroutine so it does not delay others.
	srv.Register(MethodRegisterGraph, protoHandler(func(_ context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
		return w.registerGraph(req)
	}), blocking)
	srv.Register(MethodDeregisterGraph, protoHandler(func(_ context.Context, req *tfpb.DeregisterGraphRequest) (*tfpb.DeregisterGraphResponse, error) {
		return w.deregisterGraph(req)
	}), inline)
	srv.Register(MethodRunGraph, w.handleRunGraph, blocking)
	srv.Register(MethodCleanupGraph, protoHandler(func(_ context.Context, req *tfpb.CleanupGraphRequest) (*tfpb.CleanupGraphResponse, error) {
		return w.cleanupGraph(req), nil
	}), inline)
	// CleanupAll waits for each variable's lock, which steps may hold.
	srv.Register(MethodCleanupAll, protoHandler(func(_ context.Context, req *tfpb.CleanupAllRequest) (*tfpb.CleanupAllResponse, error) {
		return w.cleanupAll(req), nil
	}), blocking)
	srv.Register(MethodRecvTensor, w.handleRecvTensor, blocking)
	srv.Register(MethodFuseRecvTensor, w.handleFuseRecvTensor, blocking)
	srv.Register(MethodLogging, protoHandler(func(_ context.Context, req *tfpb.LoggingRequest) (*tfpb.LoggingResponse, error) {
		return w.logging(req), nil
	}), inline)
	srv.Register(MethodTracing, protoHandler(func(_ context.Context, req *tfpb.TracingRequest) (*tfpb.TracingResponse, error) {
		return w.tracing(req)
	}), inline)
	srv.Register(MethodRecvBuf, protoHandler(func(_ context.Context, req *tfpb.RecvBufRequest) (*tfpb.RecvBufResponse, error) {
		return w.recvBuf(req)
	}), inline)
	srv.Register(MethodCompleteGroup, protoHandler(func(ctx context.Context, req *tfpb.CompleteGroupRequest) (*tfpb.CompleteGroupResponse, error) {
		return w.completeGroup(ctx, req)
	}), blocking)
	srv.Register(MethodCompleteInstance, protoHandler(func(ctx context.Context, req *tfpb.CompleteInstanceRequest) (*tfpb.CompleteInstanceResponse, error) {
		return w.completeInstance(ctx, req)
	}), blocking)
	srv.Register(MethodGetStepSequence, protoHandler(func(_ context.Context, req *tfpb.GetStepSequenceRequest) (*tfpb.GetStepSequenceResponse, error) {
		return w.getStepSequence(req), nil
	}), inline)
	srv.Register(MethodMarkRecvFinished, protoHandler(func(_ context.Context, req *tfpb.MarkRecvFinishedRequest) (*tfpb.MarkRecvFinishedResponse, error) {
		return w.markRecvFinished(req), nil
	}), inline)
}

// protoHandler adapts a method whose request and response are plain
// protobufs (no tensor segments) to an rpc.Handler.
func protoHandler[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](f func(context.Context, PReq) (Resp, error)) rpc.Handler {
	return func(ctx context.Context, in *wire.Inbound, resp *rpc.Response) error {
		req := PReq(new(Req))
		if err := proto.Unmarshal(in.Meta, req); err != nil {
			return rpc.Errorf(wire.InvalidArgument, "decode %T: %v", req, err)
		}
		out, err := f(ctx, req)
		if err != nil {
			return err
		}
		resp.Meta, err = proto.MarshalOptions{}.MarshalAppend(resp.Meta, out)
		if err != nil {
			return rpc.Errorf(wire.Internal, "encode %T: %v", out, err)
		}
		return nil
	}
}
