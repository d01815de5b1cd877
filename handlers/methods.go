package handlers

import "github.com/starwire/starwire/rpc"

// The WorkerService methods as starwire methods, from the generated stubs.
// Their names are the bare gRPC method names, so a method's ID is the same
// on every starwire peer.
var (
	MethodGetStatus           = WorkerServiceStarwireMethods.GetStatus
	MethodCreateWorkerSession = WorkerServiceStarwireMethods.CreateWorkerSession
	MethodDeleteWorkerSession = WorkerServiceStarwireMethods.DeleteWorkerSession
	MethodRegisterGraph       = WorkerServiceStarwireMethods.RegisterGraph
	MethodDeregisterGraph     = WorkerServiceStarwireMethods.DeregisterGraph
	MethodRunGraph            = WorkerServiceStarwireMethods.RunGraph
	MethodCleanupGraph        = WorkerServiceStarwireMethods.CleanupGraph
	MethodCleanupAll          = WorkerServiceStarwireMethods.CleanupAll
	MethodRecvTensor          = WorkerServiceStarwireMethods.RecvTensor
	MethodLogging             = WorkerServiceStarwireMethods.Logging
	MethodTracing             = WorkerServiceStarwireMethods.Tracing
	MethodRecvBuf             = WorkerServiceStarwireMethods.RecvBuf
	MethodCompleteGroup       = WorkerServiceStarwireMethods.CompleteGroup
	MethodCompleteInstance    = WorkerServiceStarwireMethods.CompleteInstance
	MethodGetStepSequence     = WorkerServiceStarwireMethods.GetStepSequence
	MethodMarkRecvFinished    = WorkerServiceStarwireMethods.MarkRecvFinished

	// MethodFuseRecvTensor fetches many rendezvous keys in one call; see the
	// package doc for its encoding. It is not in the .proto, so it is
	// registered and called by hand.
	MethodFuseRecvTensor = rpc.NewMethod("FuseRecvTensor")
)
