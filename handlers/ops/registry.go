package ops

import (
	"sort"

	"github.com/starwire/starwire/wire/tfpb"
)

// A Spec is what the worker knows of an op: the attribute defaults a
// master strips before sending a graph, and how to build its kernel. Specs
// are registered once, at init, and only read afterwards.
type Spec struct {
	Defaults map[string]*tfpb.AttrValue
	// Inputs, Types and NumOutputs declare the prologue most builders
	// share (see Kernel): how many data inputs a node has, the type
	// attributes it must carry and the types they may hold, and how many
	// outputs its kernel makes. Undeclared, Build checks them itself;
	// NumOutputs defaults to len(Outputs) when Outputs names them.
	Inputs     Count
	Types      []TypeAttr
	NumOutputs Count
	// Async ops may wait (for a tensor from another partition), so the
	// executor runs them on goroutines of their own.
	Async bool
	// Sends marks an op whose kernel hands a tensor to whoever waits for
	// it, a RecvTensor call among them, and may so write to the network:
	// the executor runs it without a compute token (see Env.Compute).
	Sends bool
	// Merges marks an op that forwards the live one of its data inputs
	// (Merge): the executor runs it when at least one is live, and makes
	// it dead only when all are; the deadness of its control inputs does
	// not reach it.
	Merges bool
	// Build checks n's attributes and inputs against env beyond what the
	// spec declares, sets n's outputs when the spec does not (and, for
	// feeds and fetches, their keys and types) and returns the kernel.
	// Callers go through Kernel, which runs the declared checks first.
	Build func(env *Env, n *Node) (Kernel, error)
	// Outputs names the op's output arguments, in order, when it has
	// several, each one tensor (Unique's y and idx): function bodies
	// address outputs as "node:arg:i". Nil means one argument holding
	// every output, so that "node:anyname:i" is output i.
	Outputs []string
}

// specs holds every supported op; filled by the other files' init.
var specs = map[string]*Spec{}

func registerOp(name string, spec *Spec) {
	if _, dup := specs[name]; dup {
		panic("ops: op " + name + " registered twice")
	}
	if spec.NumOutputs.optional != 0 {
		panic("ops: op " + name + " declares optional outputs")
	}
	specs[name] = spec
}

// Lookup returns the Spec of op name, or nil when it is not supported.
func Lookup(name string) *Spec { return specs[name] }

// Names returns the names of the supported ops, sorted.
func Names() []string {
	names := make([]string, 0, len(specs))
	for name := range specs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
