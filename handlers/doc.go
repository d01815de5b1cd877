// Package handlers implements TensorFlow's WorkerService over a
// parameter-server runtime: rendezvous, graph registry, ops and variables.
//
// A Worker serves one task. Register puts every WorkerService method, plus
// the FuseRecvTensor extension, on a starwire rpc.Server; GRPCService serves
// the same state over gRPC; WorkerClient calls a Worker over starwire.
//
// # Tensors on the wire
//
// Over starwire, tensors never travel inside protobufs:
//
//   - RecvTensor: the request metadata is a RecvTensorRequest; the response
//     metadata is a RecvTensorResponse whose tensor has dtype and shape but
//     no content, and the tensor follows as the frame's one raw segment. A
//     dead tensor has is_dead set and an empty segment.
//   - FuseRecvTensor: the request metadata is a sequence of
//     RecvTensorRequest messages, each preceded by its length as a uvarint
//     (protobuf's length-delimited framing); the response metadata is the
//     same kind of sequence of RecvTensorResponse messages, and the tensors
//     follow as raw segments in the same order. Every key waits up to the
//     call's deadline; one failure fails the call.
//   - RunGraph: RunGraphRequest.send and RunGraphResponse.recv entries carry
//     names only; their tensors are the frame's raw segments, in order. (A
//     request without segments may carry the tensors in its protobuf.)
//
// Over gRPC the same data travels as standard protobufs, tensors in
// TensorProto.tensor_content (strings in string_val). TensorFromProto also
// reads the typed fields (float_val, int_val, int64_val, ...), repeating the
// last value when there are fewer values than elements, as Const nodes rely on.
//
// # Graphs, feeds and fetches
//
// RegisterGraph checks a partition (every op known, attributes well formed
// after filling in the op defaults a master strips, inputs "node",
// "node:i" and "^node" resolvable, no cycle) and refuses it with
// InvalidArgument naming the node. RunGraph follows TensorFlow's
// distributed master: a partition's feeds are _Recv nodes with
// client_terminated=true whose rendezvous keys (CreateKey) are the names in
// RunGraphRequest.send, and its fetches are client-terminated _Send nodes
// whose keys are RunGraphRequest.recv_key. A feed of the wrong dtype, or of
// a shape its node's "shape" or "_output_shapes" attribute refuses, fails
// with InvalidArgument before the step starts. As a convenience for
// hand-written graphs, a send name that is not a rendezvous key feeds the
// Placeholder or _Arg node of that name, and a recv_key that is not one
// fetches the output "node" or "node:i" (a _Retval's fetch is its input).
//
// A non-client _Send puts its tensor in the step's rendezvous; a _Recv takes
// it from there when the sender is on this task, or pulls it with RecvTensor
// from the sender's task, found with Options.Resolver. Nodes run in dataflow
// order; _Recv nodes, which wait, run on goroutines of their own. The first
// failing node aborts the step: its waiting receivers, local and remote, get
// the error, and the step's state stays until CleanupGraph drops it.
//
// # Ops
//
// Const, Placeholder, _Arg, _Retval, Identity, StopGradient, NoOp, Shape,
// Reshape, ZerosLike, Fill, _Send, _Recv, _HostSend, _HostRecv,
// VarHandleOp, VariableV2, ReadVariableOp, Assign, AssignVariableOp,
// AssignAddVariableOp, AssignSubVariableOp, ApplyGradientDescent,
// ResourceApplyGradientDescent, GatherV2, ResourceGather,
// ResourceScatterAdd, ResourceSparseApplyAdagrad, SaveV2, RestoreV2, MatMul,
// Add, AddV2, Sub, Mul, RealDiv, Maximum (with broadcasting), Neg, Sigmoid,
// SigmoidGrad, Log, Log1p, Exp, Square, Sum, Mean. Arithmetic supports
// DT_FLOAT, DT_DOUBLE, DT_INT32 and DT_INT64; Ops lists them at run time.
//
// Variables live in the Worker across steps and are shared by concurrent
// steps: dense updates take the variable's lock for writing, sparse row
// updates take it for reading plus a striped per-row lock, so updates of
// distinct rows run in parallel and updates of one row add up exactly (see
// variable). SaveV2 and RestoreV2 write and read checkpoints under
// Options.CheckpointDir, so a restarted parameter server resumes.
//
// # Other methods
//
// GetStatus reports the task's one CPU device. Logging turns per-node step
// timing on and off, and returns (and forgets) the stats of the steps asked
// for; Tracing turns the same timing on for a duration. CompleteGroup and
// CompleteInstance resolve collective groups and instances among their
// members; GetStepSequence keeps a counter per graph key. MarkRecvFinished
// is accepted and does nothing, since no per-request RecvTensor state is
// kept. RecvBuf answers Unimplemented: collective data transfers are not
// supported.
package handlers
