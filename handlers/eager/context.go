package eager

import (
	"strconv"
	"sync"
	"time"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// A handleKey names a tensor a context holds: output out of operation op.
type handleKey struct {
	op  int64
	out int32
}

// A resource is what a context knows of a resource handle it holds: the
// variable's container and shared name, by which a graph's VarHandleOp
// reaches the same variable, and its dtype and shape attributes. Owned
// says the context made the variable (an anonymous VarHandleOp) and drops
// it with the last handle.
type resource struct {
	container, name string
	dtype           *tfpb.AttrValue
	shape           *tfpb.AttrValue
	owned           bool
}

// A handle is one tensor a context holds: a value (owning one reference of
// its tensor) and, for a resource handle, its resource.
type handle struct {
	v   ops.Value
	res *resource
}

// A function is a function a context registered, with the library it
// needs, and the graphs built to run it, by the kinds of their inputs.
type function struct {
	def       *tfpb.FunctionDef
	lib       *tfpb.FunctionDefLibrary
	component bool
	graphs    map[string]*builtCall
}

// maxGraphsPerFunction bounds the graphs a function keeps: one per
// distinct set of inputs (variables, dtypes), which a training job keeps
// constant.
const maxGraphsPerFunction = 64

// A serverContext is one client's context on the task: the tensors its
// operations made, by handle, and its functions. mu guards every field
// after the first three.
type serverContext struct {
	id        uint64
	keepAlive time.Duration
	lastUse   time.Time // guarded by the Service's mu

	mu        sync.Mutex
	view      uint64
	handles   map[handleKey]*handle
	functions map[string]*function
	closed    bool
}

func newServerContext(id, view uint64, keepAlive time.Duration, now time.Time) *serverContext {
	return &serverContext{id: id, view: view, keepAlive: keepAlive, lastUse: now,
		handles: make(map[handleKey]*handle), functions: make(map[string]*function)}
}

// container is the variable container of the context's anonymous
// variables.
func (c *serverContext) container() string { return "eager_" + strconv.FormatUint(c.id, 10) }

// lookup returns the handle k names.
func (c *serverContext) lookup(k handleKey) (*handle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.handles[k]
	if h == nil {
		return nil, status.Errorf(wire.InvalidArgument, "Unable to find the relevant tensor remote_handle: Op ID: %d, Output num: %d", k.op, k.out)
	}
	return h, nil
}

// add keeps h under k, replacing (and releasing) what k held.
func (c *serverContext) add(env *ops.Env, k handleKey, h *handle) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		h.release(env)
		return status.Errorf(wire.Aborted, "context %d was closed while an operation ran", c.id)
	}
	old := c.handles[k]
	c.handles[k] = h
	c.mu.Unlock()
	if old != nil {
		old.release(env)
	}
	return nil
}

// decref drops the handle k names; an unknown handle is ignored, as a
// client may release a handle whose operation failed.
func (c *serverContext) decref(env *ops.Env, k handleKey) {
	c.mu.Lock()
	h := c.handles[k]
	delete(c.handles, k)
	c.mu.Unlock()
	if h != nil {
		h.release(env)
	}
}

// errContextClosed fails what still waits in the rendezvous of the
// context's single ops.
var errContextClosed = status.Errorf(wire.Aborted, "the eager context was closed")

// close drops every handle, the variables the context made, and the
// rendezvous state of its single ops (whose step is the context id, as
// in TensorFlow).
func (c *serverContext) close(env *ops.Env) {
	c.mu.Lock()
	hs := c.handles
	c.handles, c.functions, c.closed = nil, nil, true
	c.mu.Unlock()
	for _, h := range hs {
		h.release(env)
	}
	env.Vars.Cleanup([]string{c.container()})
	env.Rendezvous.Cleanup(int64(c.id), errContextClosed)
}

// release gives back h's tensor reference, and drops the variable of an
// anonymous resource, as TensorFlow deletes one with its last handle.
func (h *handle) release(env *ops.Env) {
	if h.v.T.Buf != nil {
		h.v.T.Buf.Release()
	}
	if h.res != nil && h.res.owned {
		env.Vars.Drop(h.res.container, h.res.name)
	}
}
