// Package tfpb holds TensorFlow's distributed-runtime protocol buffers — the
// worker service, tensors, graphs and the configs they carry — declared with
// TensorFlow's own package, message, field and enum names and numbers, so that
// the bytes starwire encodes are the bytes a TensorFlow worker decodes and the
// gRPC method paths are the ones TensorFlow serves
// ("/tensorflow.WorkerService/RecvTensor", ...).
//
// Fields a newer TensorFlow release sends that are not declared here are kept
// as unknown fields when decoded and written back unchanged, so relaying a
// message loses nothing. The Go code is generated: edit the .proto files and
// run "make generate" (needs protoc on PATH; the plugins are pinned in go.mod).
package tfpb
