package ops

import (
	"fmt"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// Kernels choose their code for an element type once, when the graph is
// built: each op keeps a byDType table holding one instantiation of a
// generic function per type it supports, its builder looks the node's
// type up, and the kernel it returns calls what it found. Go cannot pass a
// generic function uninstantiated, so a table lists its instantiations in
// the order of its type set (numericTable, floatTable, castTable); the
// type set is then the table's, and a type missing from it is refused in
// one place, with one message.

// numeric is the element types of arithmetic kernels: numericTypes.
type numeric interface {
	~float32 | ~float64 | ~int32 | ~int64
}

// floating is the element types of kernels that need real numbers: floatTypes.
type floating interface{ ~float32 | ~float64 }

// numericTypes are the element types arithmetic kernels support.
var numericTypes = []wire.DataType{wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTInt64}

// floatTypes are the element types of kernels that need real numbers.
var floatTypes = []wire.DataType{wire.DTFloat, wire.DTDouble}

// indexTypes are the element types of indices, axes and shapes.
var indexTypes = []wire.DataType{wire.DTInt32, wire.DTInt64}

// castTypes are the types Cast converts between; bool is viewed as uint8.
var castTypes = []wire.DataType{wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTInt64, wire.DTInt8, wire.DTUint8, wire.DTInt16, wire.DTUint16, wire.DTBool}

// A byDType maps each element type an op supports to the op's code F for
// it. Tables are built at init or by a builder and never change, so
// kernels of every step may read them at once. The code takes tensors by
// value: a pointer passed through a function value escapes, which would
// cost each kernel call an allocation for its result tensor.
type byDType[F any] struct {
	types []wire.DataType // the type set, in the order errors list it
	funcs []F             // funcs[i] is the code for types[i]
}

// numericTable is a table over numericTypes.
func numericTable[F any](f32, f64, i32, i64 F) byDType[F] {
	return byDType[F]{types: numericTypes, funcs: []F{f32, f64, i32, i64}}
}

// floatTable is a table over floatTypes.
func floatTable[F any](f32, f64 F) byDType[F] {
	return byDType[F]{types: floatTypes, funcs: []F{f32, f64}}
}

// indexTable is a table over indexTypes.
func indexTable[F any](i32, i64 F) byDType[F] {
	return byDType[F]{types: indexTypes, funcs: []F{i32, i64}}
}

// castTable is a table over castTypes.
func castTable[F any](f32, f64, i32, i64, i8, u8, i16, u16, b F) byDType[F] {
	return byDType[F]{types: castTypes, funcs: []F{f32, f64, i32, i64, i8, u8, i16, u16, b}}
}

// floats is t restricted to floatTypes, for ops defined on real numbers
// alone that share their code with ones defined on integers too.
func (t byDType[F]) floats() byDType[F] {
	var r byDType[F]
	for i, dt := range t.types {
		if dt == wire.DTFloat || dt == wire.DTDouble {
			r.types = append(r.types, dt)
			r.funcs = append(r.funcs, t.funcs[i])
		}
	}
	return r
}

// lookup returns the code for dt, and false when t does not support dt.
func (t byDType[F]) lookup(dt wire.DataType) (F, bool) {
	for i, x := range t.types {
		if x == dt {
			return t.funcs[i], true
		}
	}
	var zero F
	return zero, false
}

// attr declares type attribute name with t's type set, for a Spec whose
// builder then takes its code with of. A type t does not support is
// refused in TypeAttr's words (see allows), which graph.Build makes InvalidArgument,
// naming the node, as TensorFlow answers a node no kernel is registered
// for.
func (t byDType[F]) attr(name string) TypeAttr { return typeIn(name, t.types...) }

// of returns the value of type attribute name, which the spec declares
// with t.attr, and its code.
func (t byDType[F]) of(n *Node, name string) (wire.DataType, F) {
	dt := n.typeOf(name)
	f, ok := t.lookup(dt)
	if !ok {
		panic(fmt.Sprintf("ops: %s: attr %q is %v, outside the type set %v its spec declares", n.Op, name, dt, t.types))
	}
	return dt, f
}

// forTensor returns the code for t's dtype, or an InvalidArgument error
// naming what for a dtype the table lacks: for kernels whose type comes
// from a variable at run time rather than from an attribute.
func (t byDType[F]) forTensor(what string, dt wire.DataType) (F, error) {
	f, ok := t.lookup(dt)
	if !ok {
		return f, status.Errorf(wire.InvalidArgument, "%s on %v, want one of %v", what, dt, t.types)
	}
	return f, nil
}
