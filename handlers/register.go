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
	srv.Register(MethodCreateWorkerSession, protoHandler(ctxFree(w.createWorkerSession)), inline)
	srv.Register(MethodDeleteWorkerSession, protoHandler(ctxFree(w.deleteWorkerSession)), inline)
	// Building a graph is quick (no I/O, no waiting), but can be large;
	// it runs off the connection's goroutine so it does not delay others.
	srv.Register(MethodRegisterGraph, protoHandler(ctxFree(w.registerGraph)), blocking)
	srv.Register(MethodDeregisterGraph, protoHandler(ctxFree(w.deregisterGraph)), inline)
	srv.Register(MethodRunGraph, w.handleRunGraph, blocking)
	srv.Register(MethodCleanupGraph, protoHandler(infallible(w.cleanupGraph)), inline)
	// CleanupAll waits for each variable's lock, which steps may hold.
	srv.Register(MethodCleanupAll, protoHandler(infallible(w.cleanupAll)), blocking)
	srv.Register(MethodRecvTensor, w.handleRecvTensor, blocking)
	srv.Register(MethodFuseRecvTensor, w.handleFuseRecvTensor, blocking)
	srv.Register(MethodLogging, protoHandler(infallible(w.logging)), inline)
	srv.Register(MethodTracing, protoHandler(ctxFree(w.tracing)), inline)
	srv.Register(MethodRecvBuf, protoHandler(ctxFree(w.recvBuf)), inline)
	srv.Register(MethodCompleteGroup, protoHandler(w.completeGroup), blocking)
	srv.Register(MethodCompleteInstance, protoHandler(w.completeInstance), blocking)
	srv.Register(MethodGetStepSequence, protoHandler(infallible(w.getStepSequence)), inline)
	srv.Register(MethodMarkRecvFinished, protoHandler(infallible(w.markRecvFinished)), inline)
}

// ctxFree adapts a worker method that needs no context to protoHandler.
func ctxFree[Req, Resp any](f func(Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(_ context.Context, req Req) (Resp, error) { return f(req) }
}

// infallible adapts a worker method that needs no context and cannot fail
// to protoHandler.
func infallible[Req, Resp any](f func(Req) Resp) func(context.Context, Req) (Resp, error) {
	return func(_ context.Context, req Req) (Resp, error) { return f(req), nil }
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
