// Package handlers serves TensorFlow's WorkerService for one task of a
// parameter-server runtime: the methods, their encoding over starwire and
// gRPC, and the task's state between calls (sessions, registered graphs,
// step statistics, collective bookkeeping).
//
// A Worker serves one task. Register puts every WorkerService method, plus
// the FuseRecvTensor extension, on a starwire rpc.Server; GRPCService serves
// the same state over gRPC. StarCaller and GRPCCaller are the one client of
// WorkerService, over starwire and over gRPC: a master's typed calls, and
// a worker's calls to its peers (Caller, which a Resolver returns), in the
// encoding below. No client changes the request it is given.
//
// The work is done by the packages below it, which know nothing of RPC:
// graph checks and runs the registered partitions, ops holds their kernels
// and the variables they share, rendezvous pairs the tensors a step sends
// with their receivers (the graph's _Recv nodes here, RecvTensor callers on
// other tasks), and tensor holds tensor memory and TensorProto conversion.
// The Worker composes them: it owns one rendezvous and one set of
// variables, and hands the graphs an ops.Env through which a remote _Recv
// pulls from another task with RecvTensor, through Options.Resolver.
// Sessions share the variables, as between-graph replicas need, except a
// session created with isolate_session_state, whose graphs get variables
// of their own, dropped by DeleteWorkerSession (see session.go).
//
// # Tensors on the wire
//
// Over starwire, tensors never travel inside protobufs:
//
//   - RecvTensor: the request metadata is a RecvTensorRequest; the response
//     metadata is a RecvTensorResponse whose tensor has dtype and shape but
//     no content, and the tensor follows as the frame's one raw segment. A
//     dead tensor has is_dead set and an empty segment. Both ends decode in
//     place: the serving worker answers from its rendezvous without
//     allocating, and a pulling worker (a remote _Recv) lands the bytes
//     through Reply.Alloc. GRPCCaller presents a gRPC peer's answers in
//     the same encoding, so that a worker's pull decodes one encoding
//     whatever the protocol.
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
// TensorProto.tensor_content (strings in string_val). tensor.FromProto also
// reads the typed fields (float_val, int_val, int64_val, ...), repeating the
// last value when there are fewer values than elements, as Const nodes rely
// on, and strings in tensor_content as TensorFlow encodes them there (all
// lengths as varints, then the bytes), as a TensorFlow client feeds them.
//
// # Graphs and steps
//
// RegisterGraph checks a partition (see package graph) and refuses it
// naming the node: NotFound for an op this binary lacks, in TensorFlow's
// words ("Op type not registered 'X' in binary running on <host>"),
// InvalidArgument otherwise. RunGraph runs one step of it; the step's
// rendezvous state stays until CleanupGraph drops it, so that a failed
// step's error reaches every receiver, local and remote.
//
// Errors carry TensorFlow's codes: InvalidArgument for feeds that do not
// decode or do not fit their node, FailedPrecondition for a variable read
// before it is initialized, Aborted for an unknown session or graph (so a
// master starts over). When a RunGraph request sets
// store_errors_in_response_body, every failure after the request decodes
// (feeds, the step, encoding the fetches) comes back as the response's
// status_code and status_error_message, and the call itself succeeds.
// Messages never repeat the code's name, which travels apart.
//
// # Other methods
//
// GetStatus reports the task's one CPU device. Logging turns per-node step
// timing on and off, and returns (and forgets) the stats of the steps asked
// for; Tracing turns the same timing on for a duration. CompleteGroup and
// CompleteInstance resolve collective groups and instances among their
// members; GetStepSequence keeps a counter per graph key. MarkRecvFinished
// is accepted and does nothing, since no per-request RecvTensor state is
// kept.
//
// RecvBuf answers Unimplemented, naming the buffer key: it moves the
// buffers of collective ops (CollectiveReduce, CollectiveBcastSend, ...),
// and no collective op is among the ops, so a graph holding one is refused
// at RegisterGraph with NotFound and no step ever makes a buffer to fetch.
// Unimplemented tells a caller that the method, not the key, is missing,
// so it does not retry as it would after NotFound or Unavailable. Group and
// instance resolution (CompleteGroup, CompleteInstance) are served, for
// masters that resolve collectives before running any.
//
// # Concurrency
//
// A Worker is safe for concurrent use; concurrent steps share its
// variables (see package ops for their locking) and its rendezvous.
package handlers
