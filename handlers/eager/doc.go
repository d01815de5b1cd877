// Package eager serves TensorFlow's EagerService for one task, so that a
// TensorFlow 2 client (a ParameterServerStrategy's ClusterCoordinator, a
// worker running a multi-device function) can place variables on the
// task and run ops and component functions there.
//
// It follows TensorFlow's eager_service_impl: a client creates a context
// (CreateContext, with an id, a view id and a keep-alive), runs single
// operations in it (Enqueue), whose outputs stay on the task under the
// handle (op_id, output_num) until the client releases them
// (handle_to_decref), registers functions (RegisterFunctionOp) and runs
// the component functions a multi-device function was partitioned into
// (RunComponentFunction). A request naming a context the task does not
// hold is answered Aborted, in TensorFlow's words, so that a client whose
// task restarted starts over; a context not heard from for longer than its
// keep-alive is collected (Collect).
//
// Ops run on the worker's own kernels (package ops) against the worker's
// Env: an eager op is one node, built from the operation's attributes and
// run once, as the graph executor runs a node. Variables made by eager
// VarHandleOps are the worker's variables: an anonymous one (TensorFlow 2's
// default) gets a name in the context's container, lives until its last
// handle is released, and is dropped with its context. Functions run on
// the graph executor (see function.go), their resource inputs bound to the
// same variables by name, their _Send and _Recv nodes meeting their peers
// under the operation's func_step_id through the worker's rendezvous, which
// RecvTensor serves to other tasks.
//
// Operations run synchronously, within their Enqueue, whether or not the
// context was created async: WaitQueueDone then has nothing to wait for,
// and StreamingEnqueue answers each request once it ran.
//
// Not served: SendPackedHandleOp (the packed handles of functions
// replicated over several devices, which a one-device task never gets)
// answers Unimplemented; a function must return tensors, not resource
// handles, and its output arguments must be single tensors, as the
// components of a partitioned function are; WaitQueueDone of particular op
// ids answers Unimplemented, as in TensorFlow.
//
// A Service is safe for concurrent use.
package eager
