// Package wire defines starwire's frame format: a fixed little-endian header,
// a protobuf metadata block and raw tensor segments that are written from, and
// read into, the tensors' own memory. It does no I/O.
package wire
