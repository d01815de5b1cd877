// Package rendezvous is where a step's tensors meet their receivers: the
// Rendezvous that pairs each tensor a _Send (or a RunGraph feed) puts in with
// the _Recv, RecvTensor or fetch that takes it out, and TensorFlow's
// rendezvous keys and device names that address them.
//
// Both sides of a worker use it: the graph executor sends and receives
// within a step, and the WorkerService's RecvTensor takes tensors out for
// other tasks. The Rendezvous is safe for concurrent use; see its doc for
// who owns a tensor while it waits.
package rendezvous
