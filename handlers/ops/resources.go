package ops

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Resources other than variables: gradient accumulators (accumulator.go)
// and queues (queue.go), what SyncReplicasOptimizer places on the ps.
//
// Sharing follows TensorFlow's ContainerInfo: a resource whose node names
// a shared_name lives in the worker's resource manager (Variables.shared)
// under its kind, container and shared name, so that every graph and step
// naming it reaches the same one until Cleanup drops its container. With
// no shared_name it is private to the kernel that made it, named
// "_<n>_<node>" as TensorFlow names it, and lives as long as its graph.
// Both are resources (lookup_table.go), as lookup tables are.

// A droppable resource releases its waiters when Cleanup drops it: their
// steps fail at once instead of waiting on a resource no graph can reach.
type droppable interface {
	resource
	drop()
}

// A resKind keeps resources of different kinds apart, as TensorFlow's
// resource manager keys them by type as well as by name.
type resKind uint8

const (
	accumulatorKind resKind = iota
	queueKind
)

type resKey struct {
	kind            resKind
	container, name string
}

// sharedResources holds the shared resources of a worker (or of a session
// isolating its state). Its zero value is empty and ready; safe for
// concurrent use.
type sharedResources struct {
	mu sync.Mutex
	m  map[resKey]resource
}

// lookupOrCreate returns the resource under k, made by create when there
// is none; a resource found is handed to check, which refuses one the
// node could not have made (a queue of other component types).
func (r *sharedResources) lookupOrCreate(k resKey, create func(name string) resource, check func(resource) error) (resource, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res := r.m[k]; res != nil {
		if err := check(res); err != nil {
			return nil, err
		}
		return res, nil
	}
	if r.m == nil {
		r.m = make(map[resKey]resource)
	}
	res := create(k.name)
	r.m[k] = res
	return res, nil
}

// cleanup drops the resources of the named containers, or all of them
// when none is named, and releases their waiters.
func (r *sharedResources) cleanup(containers []string) {
	r.mu.Lock()
	var dropped []resource
	for k, res := range r.m {
		if len(containers) == 0 || slices.Contains(containers, k.container) {
			delete(r.m, k)
			dropped = append(dropped, res)
		}
	}
	r.mu.Unlock()
	for _, res := range dropped {
		if d, ok := res.(droppable); ok {
			d.drop()
		}
	}
}

// privateIDs numbers private resources, as TensorFlow's ContainerInfo does
// for the names of resources private to a kernel.
var privateIDs atomic.Int64

// A resourceOp is what a node making a resource handle (an accumulator's,
// a queue's) keeps between steps: where its resource lives, and the
// private one once made.
type resourceOp struct {
	vars      *Variables
	key       resKey
	private   bool
	node      string
	create    func(name string) resource
	check     func(resource) error
	handleDTy wire.DataType // DTResource, or DTString for ref handles

	mu  sync.Mutex
	own resource // the private resource, made by the first step
}

// resourceSpec is the Spec of an op that makes a resource (see
// newResourceOp): no inputs, the resource's handle out.
func resourceSpec(defaults map[string]*tfpb.AttrValue, types []TypeAttr, build func(*Env, *Node) (Kernel, error)) *Spec {
	return &Spec{Defaults: defaults, Inputs: exactly(0), Types: types, NumOutputs: exactly(1), Build: build}
}

// newResourceOp reads n's container and shared_name attributes.
func newResourceOp(env *Env, n *Node, kind resKind, handle wire.DataType, create func(string) resource, check func(resource) error) (*resourceOp, error) {
	container, err := n.attrString("container")
	if err != nil {
		return nil, err
	}
	shared, err := n.attrString("shared_name")
	if err != nil {
		return nil, err
	}
	return &resourceOp{vars: env.Vars, key: resKey{kind, container, shared}, private: shared == "", node: n.Name, create: create, check: check, handleDTy: handle}, nil
}

// get returns the node's resource, making it on first use.
func (o *resourceOp) get() (resource, error) {
	if !o.private {
		return o.vars.shared.lookupOrCreate(o.key, o.create, o.check)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.own == nil {
		o.own = o.create(fmt.Sprintf("_%d_%s", privateIDs.Add(1)-1, o.node))
	}
	return o.own, nil
}

// kernel is the node's kernel: its output is the handle.
func (o *resourceOp) kernel(c *Context) error {
	r, err := o.get()
	if err != nil {
		return err
	}
	c.Out[0] = Value{T: wire.Tensor{DType: o.handleDTy}, Set: true, res: r}
	return nil
}

// inputResource returns the resource of kind R input i refers to; what
// names the kind in the error.
func inputResource[R resource](c *Context, i int, what string) (R, error) {
	r, ok := c.In[i].res.(R)
	if !ok {
		var zero R
		return zero, status.Errorf(wire.InvalidArgument, "input %d is not a handle of %s", i, what)
	}
	return r, nil
}

// shapeString formats a shape as TensorFlow's DebugString does: "[2,3]",
// "[]" for a scalar, "?" for an unknown dimension and "<unknown>" for an
// unknown rank (nil).
func shapeString(s []int64) string {
	if s == nil {
		return "<unknown>"
	}
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ',')
		}
		if d < 0 {
			b = append(b, '?')
		} else {
			b = fmt.Appendf(b, "%d", d)
		}
	}
	return string(append(b, ']'))
}

// scalarInput returns input i, which must be a scalar of dtype dt; what
// names it in TensorFlow's words ("Argument local_step").
func scalarInput(c *Context, i int, dt wire.DataType, what string) (*wire.Tensor, error) {
	t, err := c.typed(i, dt)
	if err != nil {
		return nil, err
	}
	if len(t.Shape) != 0 {
		return nil, status.Errorf(wire.InvalidArgument, "%s must be scalar, but had bad shape %s", what, shapeString(t.Shape))
	}
	return t, nil
}
