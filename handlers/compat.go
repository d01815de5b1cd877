package handlers

import (
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire/tfpb"
)

// Names kept while the command moves to the packages that now hold them.

// FrameIter is rendezvous.FrameIter.
//
// Deprecated: use rendezvous.FrameIter.
type FrameIter = rendezvous.FrameIter

// CreateKey is rendezvous.CreateKey.
//
// Deprecated: use rendezvous.CreateKey.
func CreateKey(src string, srcIncarnation uint64, dst, name string, fi FrameIter) string {
	return rendezvous.CreateKey(src, srcIncarnation, dst, name, fi)
}

// View is tensor.View.
//
// Deprecated: use tensor.View.
func View[T tensor.Elem](b []byte) []T { return tensor.View[T](b) }

// Bytes is tensor.Bytes.
//
// Deprecated: use tensor.Bytes.
func Bytes[T tensor.Elem](s []T) []byte { return tensor.Bytes(s) }

// ShapeToProto is tensor.ShapeToProto.
//
// Deprecated: use tensor.ShapeToProto.
func ShapeToProto(shape []int64) *tfpb.TensorShapeProto { return tensor.ShapeToProto(shape) }
