// Package graph is the worker's graph executor: it checks a registered
// partition and builds its kernels (Build), and runs steps of it (Run).
//
// It follows TensorFlow's distributed master: a partition's feeds are _Recv
// nodes with client_terminated=true whose rendezvous keys are the names in
// RunGraphRequest.send, and its fetches are client-terminated _Send nodes
// whose keys are RunGraphRequest.recv_key. A feed of the wrong dtype, or of
// a shape its node's "shape" or "_output_shapes" attribute refuses, fails
// with InvalidArgument before the step starts. As a convenience for
// hand-written graphs, a send name that is not a rendezvous key feeds the
// Placeholder or _Arg node of that name, and a recv_key that is not one
// fetches the output "node" or "node:i" (a _Retval's fetch is its input).
//
// A partition's function library is supported by inlining (see
// functions.go): a node calling a function of the library, by the
// function's name or through PartitionedCall or StatefulPartitionedCall,
// becomes the function's body bound to the call's attributes; calls inside
// bodies are inlined in turn, up to 64 deep, and recursion is refused. A body that
// uses an op this binary lacks is refused at Build with NotFound, naming
// the function, its node and the call. Control flow ops (While, If) are
// not among the ops.
//
// Nodes run in dataflow order; nodes whose op may wait (_Recv) run on
// goroutines of their own, the others on the goroutine that called Run. The
// first failing node aborts the step: its waiting receivers, local and
// remote, get the error through the rendezvous, no further node starts, and
// Run returns once the nodes running have ended, leaving no goroutine
// behind. The step's rendezvous state stays until the caller cleans the
// step up (rendezvous.Cleanup).
//
// # Ownership and concurrency
//
// A Graph is immutable once built and safe for concurrent use: every Run is
// a step of its own, with its own values and context. Run borrows the feeds
// for the duration of the call, and what it keeps past it (in the
// rendezvous) it copies or references. The fetched tensors it returns each
// own a reference, which the caller releases.
package graph
