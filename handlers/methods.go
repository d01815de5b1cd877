package handlers

import "github.com/starwire/starwire/rpc"

// The WorkerService methods as starwire methods. Their names are the gRPC
// method names, so a method's ID is the same on every starwire peer.
var (
	MethodGetStatus           = rpc.NewMethod("GetStatus")
	MethodCreateWorkerSession = rpc.NewMethod("CreateWorkerSession")
	MethodDeleteWorkerSession = rpc.NewMethod("DeleteWorkerSession")
	MethodRegisterGraph       = rpc.NewMethod("RegisterGraph")
	MethodDeregisterGraph     = rpc.NewMethod("DeregisterGraph")
	MethodRunGraph            = rpc.NewMethod("RunGraph")
	MethodCleanupGraph        = rpc.NewMethod("CleanupGraph")
	MethodCleanupAll          = rpc.NewMethod("CleanupAll")
	MethodRecvTensor          = rpc.NewMethod("RecvTensor")
	MethodLogging             = rpc.NewMethod("Logging")
	MethodTracing             = rpc.NewMethod("Tracing")
	MethodRecvBuf             = rpc.NewMethod("RecvBuf")
	MethodCompleteGroup       = rpc.NewMethod("CompleteGroup")
	MethodCompleteInstance    = rpc.NewMethod("CompleteInstance")
	MethodGetStepSequence     = rpc.NewMethod("GetStepSequence")
	MethodMarkRecvFinished    = rpc.NewMethod("MarkRecvFinished")

	// MethodFuseRecvTensor fetches many rendezvous keys in one call; see the
	// package doc for its encoding.
	MethodFuseRecvTensor = rpc.NewMethod("FuseRecvTensor")
)
