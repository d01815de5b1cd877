// Package tensor holds what every part of the worker does with a
// wire.Tensor's memory: typed views of its bytes, pooled and owned
// allocation, copies and references, and conversion to and from
// TensorFlow's TensorProto.
//
// # Ownership
//
// A wire.Tensor whose Buf is set owns one reference of that pooled buffer;
// whoever holds the tensor releases it (Buf.Release, or ReleaseAll), and Ref
// hands out another reference to share the memory. New, Copy and FromProto
// return tensors with a reference of their own. A tensor without a Buf
// points into memory the garbage collector keeps alive (Owned, a constant,
// a caller's slice) and needs no release.
//
// # Concurrency
//
// The functions keep no state; a tensor's bytes may be read by many
// goroutines at once and must be written by one, with no readers.
package tensor
