// Package handlers implements TensorFlow's WorkerService over a
// parameter-server runtime: rendezvous, graph registry, ops and variables.
//
// A Worker serves one task. Register puts every WorkerService method on a
// starwire rpc.Server; GRPCService serves the same state over gRPC.
//
// Over starwire, tensors never travel inside protobufs:
//
//   - RecvTensor: the request metadata is a RecvTensorRequest; the response
//     metadata is a RecvTensorResponse whose tensor has dtype and shape but
//     no content, and the tensor follows as the frame's one raw segment.
//   - FuseRecvTensor (a starwire extension): the request metadata is a
//     sequence of RecvTensorRequest messages, each preceded by its length as
//     a uvarint; the response metadata is the same kind of sequence of
//     RecvTensorResponse messages, and the tensors follow as raw segments in
//     the same order.
//   - RunGraph: RunGraphRequest.send and RunGraphResponse.recv entries carry
//     names only; their tensors are the frame's raw segments, in order.
//
// Over gRPC the same data travels as standard protobufs, tensors in
// TensorProto.tensor_content.
//
// Feeds and fetches follow TensorFlow's distributed master: a partition
// graph's feeds are _Recv nodes with client_terminated=true whose rendezvous
// keys (see CreateKey) are the names in RunGraphRequest.send; its fetches are
// client-terminated _Send nodes whose keys are RunGraphRequest.recv_key.
// As a convenience for hand-written graphs, a send name that is not a
// rendezvous key feeds the Placeholder or _Arg node of that name, and a
// recv_key that is not a rendezvous key fetches the output "node" or
// "node:i" (a _Retval node's fetch is its input).
package handlers
