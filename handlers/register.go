package handlers

import (
	"context"

	"github.com/starwire/starwire/rpc"
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
	srv.Register(MethodGetStatus, rpc.HandleProto(func(_ context.Context, _ *tfpb.GetStatusRequest) (*tfpb.GetStatusResponse, error) {
		return w.getStatus(), nil
	}), inline)
	srv.Register(MethodCreateWorkerSession, rpc.HandleProto(ctxFree(w.createWorkerSession)), inline)
	srv.Register(MethodDeleteWorkerSession, rpc.HandleProto(ctxFree(w.deleteWorkerSession)), inline)
	// Building a graph is quick (no I/O, no waiting), but can be large;
	// it runs off the connection's goroutine so it does not delay others.
	srv.Register(MethodRegisterGraph, rpc.HandleProto(ctxFree(w.registerGraph)), blocking)
	srv.Register(MethodDeregisterGraph, rpc.HandleProto(ctxFree(w.deregisterGraph)), inline)
	srv.Register(MethodRunGraph, w.handleRunGraph, blocking)
	srv.Register(MethodCleanupGraph, rpc.HandleProto(infallible(w.cleanupGraph)), inline)
	// CleanupAll waits for each variable's lock, which steps may hold.
	srv.Register(MethodCleanupAll, rpc.HandleProto(infallible(w.cleanupAll)), blocking)
	srv.Register(MethodRecvTensor, w.handleRecvTensor, blocking)
	srv.Register(MethodFuseRecvTensor, w.handleFuseRecvTensor, blocking)
	srv.Register(MethodLogging, rpc.HandleProto(infallible(w.logging)), inline)
	srv.Register(MethodTracing, rpc.HandleProto(ctxFree(w.tracing)), inline)
	srv.Register(MethodRecvBuf, rpc.HandleProto(ctxFree(w.recvBuf)), inline)
	srv.Register(MethodCompleteGroup, rpc.HandleProto(w.completeGroup), blocking)
	srv.Register(MethodCompleteInstance, rpc.HandleProto(w.completeInstance), blocking)
	srv.Register(MethodGetStepSequence, rpc.HandleProto(infallible(w.getStepSequence)), inline)
	srv.Register(MethodMarkRecvFinished, rpc.HandleProto(infallible(w.markRecvFinished)), inline)
}

// ctxFree adapts a worker method that needs no context to rpc.HandleProto.
func ctxFree[Req, Resp any](f func(Req) (Resp, error)) func(context.Context, Req) (Resp, error) {
	return func(_ context.Context, req Req) (Resp, error) { return f(req) }
}

// infallible adapts a worker method that needs no context and cannot fail
// to rpc.HandleProto.
func infallible[Req, Resp any](f func(Req) Resp) func(context.Context, Req) (Resp, error) {
	return func(_ context.Context, req Req) (Resp, error) { return f(req), nil }
}
