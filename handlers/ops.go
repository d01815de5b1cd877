package handlers

import (
	"sort"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// An opSpec is what the worker knows of an op: the attribute defaults a
// master strips before sending a graph, and how to build its kernel.
type opSpec struct {
	defaults map[string]*tfpb.AttrValue
	// async ops may wait (for a tensor from another partition), so they
	// run on goroutines of their own.
	async bool
	// build checks n's attributes and inputs, sets n.nouts and returns the
	// kernel.
	build func(w *Worker, n *node) (kernel, error)
}

// opSpecs holds every supported op; filled by the ops_*.go files' init.
var opSpecs = map[string]*opSpec{}

func registerOp(name string, spec *opSpec) {
	if _, dup := opSpecs[name]; dup {
		panic("handlers: op " + name + " registered twice")
	}
	opSpecs[name] = spec
}

// Ops returns the names of the ops a Worker runs, sorted.
func Ops() []string {
	names := make([]string, 0, len(opSpecs))
	for name := range opSpecs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// numericTypes are the element types arithmetic kernels support.
var numericTypes = []wire.DataType{wire.DTFloat, wire.DTDouble, wire.DTInt32, wire.DTInt64}

// floatTypes are the element types of kernels that need real numbers.
var floatTypes = []wire.DataType{wire.DTFloat, wire.DTDouble}

// indexTypes are the element types of indices, axes and shapes.
var indexTypes = []wire.DataType{wire.DTInt32, wire.DTInt64}
