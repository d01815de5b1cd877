package ops

import (
	"context"

	"github.com/starwire/starwire/handlers/compute"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// An Env is the task-wide state kernels reach beyond their inputs: the
// worker's rendezvous and variables, how to pull a tensor from another task,
// and where checkpoints go. Every graph of a worker is built against the
// same Env, except those of a session isolating its state, whose Env is a
// copy with variables of its own; an Env must not change once graphs are
// built against it.
type Env struct {
	// Task is the task's name, "/job:ps/replica:0/task:0": a _Send must
	// send from it, and a _Recv whose sender is elsewhere pulls remotely.
	Task string
	// Rendezvous is where _Send puts tensors and a local _Recv takes them.
	Rendezvous *rendezvous.Rendezvous
	// Vars holds the variables, across steps and graphs.
	Vars *Variables
	// RemoteRecv pulls key's tensor of step from task's rendezvous; the
	// returned tensor owns its Buf reference and its shape. Nil means
	// every _Recv must be local.
	RemoteRecv func(ctx context.Context, task string, step int64, key string) (wire.Tensor, error)
	// CheckpointDir is where SaveV2, RestoreV2 and MergeV2Checkpoints read
	// and write (see resolvePrefix); empty disables them.
	CheckpointDir string
	// StreamDir is where KvResourceStreamExport writes the change stream
	// of embedding variables (kv_stream.go); empty disables it.
	StreamDir string
	// StreamKeep is how many versions of the change stream are kept at
	// least (changes.WriterOptions.Keep); 0 keeps every one.
	StreamKeep int
	// Host names the machine in errors that TensorFlow phrases with it
	// ("Op type not registered 'X' in binary running on <Host>").
	Host string
	// Compute bounds the kernels that compute at once, across every task
	// that shares it: the executor runs each kernel of an op neither Async
	// nor Sends holding one of its tokens, and those alone. Nil means no
	// bound.
	Compute *compute.Limit
}

// A Node is what a kernel's builder sees of a graph node, and what it tells
// the executor back. The executor fills in the first fields; the builder
// sets the others. It is not changed once the graph is built.
type Node struct {
	Name, Op string
	// Attrs are the node's attributes, with the op's defaults filled in.
	Attrs map[string]*tfpb.AttrValue
	// NumInputs is the number of data inputs.
	NumInputs int

	// NumOutputs is the number of outputs the kernel makes.
	NumOutputs int
	// Key and ClientTerminated are a _Send's or _Recv's rendezvous key and
	// whether the RunGraph caller is its other end (a fetch or a feed).
	Key              string
	ClientTerminated bool
	// FeedType and FeedShape are what a feed (a client-terminated _Recv,
	// Placeholder, _Arg) accepts; FeedShape is nil when unknown and has -1
	// for unknown dimensions.
	FeedType  wire.DataType
	FeedShape []int64

	// spec is the Spec whose Kernel builds the node, and misread the
	// first attribute its Build read that the spec does not declare
	// (typeOf, typesOf, intOf): Kernel's error, not a zero value.
	spec    *Spec
	misread error
}

// A Kernel computes one node's outputs from its inputs in a step. It may
// be run by several steps at once, each with a Context of its own.
type Kernel func(c *Context) error

// A Context is what a kernel sees of one step. The executor sets its
// exported fields and calls Run. Kernels never write into their inputs'
// memory: it may be a graph constant, a feed, or another node's output.
type Context struct {
	Ctx  context.Context
	Step int64
	// Feeds are the step's tensors fed by node name (Placeholder, _Arg).
	Feeds map[string]wire.Tensor
	In    []Value
	Out   []Value

	temp []wire.Tensor // tensors read from ref inputs, released after the kernel
}

// Run runs k on c and releases what k read from variables.
func (c *Context) Run(k Kernel) error {
	err := k(c)
	for i := range c.temp {
		c.temp[i].Buf.Release()
	}
	c.temp = nil
	return err
}

// A Value is one output of a node in a step: a tensor, owning one
// reference of its Buf, or a variable (a resource handle, or the ref output
// of VariableV2, which readers see as its current value; T then only has
// its dtype).
type Value struct {
	T     wire.Tensor
	Set   bool // the node computed it
	v     *variable
	isRef bool
	res   resource // a handle of a resource other than a variable
}

// IsResource reports whether the value is a resource handle, which has no
// tensor to read.
func (v *Value) IsResource() bool { return (v.v != nil && !v.isRef) || v.res != nil }

// Read returns the value as a tensor with a reference of its own: a copy of
// a ref's variable, or another reference of the tensor.
func (v *Value) Read() (wire.Tensor, error) {
	if v.isRef {
		return v.v.read()
	}
	return tensor.Ref(v.T), nil
}

// input returns input i as a tensor, reading a ref input's variable.
func (c *Context) input(i int) (*wire.Tensor, error) {
	in := &c.In[i]
	if in.isRef {
		t, err := in.v.read()
		if err != nil {
			return nil, err
		}
		c.temp = append(c.temp, t)
		return &c.temp[len(c.temp)-1], nil
	}
	if in.v != nil || in.res != nil {
		return nil, status.Errorf(wire.InvalidArgument, "input %d is a resource handle, not a tensor", i)
	}
	return &in.T, nil
}

// typed returns input i after checking its dtype.
func (c *Context) typed(i int, want wire.DataType) (*wire.Tensor, error) {
	t, err := c.input(i)
	if err != nil {
		return nil, err
	}
	if t.DType != want {
		return nil, status.Errorf(wire.InvalidArgument, "input %d is %v, want %v", i, t.DType, want)
	}
	return t, nil
}

// inputs sets ts[i] to input i, as input returns it, for every i below
// len(ts), and stops at the first error. Kernels pass an array on their
// stack, so fetching several inputs costs no allocation.
func (c *Context) inputs(ts []*wire.Tensor) error {
	for i := range ts {
		var err error
		if ts[i], err = c.input(i); err != nil {
			return err
		}
	}
	return nil
}

// typedInputs is inputs for kernels whose first len(ts) inputs all have
// dtype want; each is checked, as typed does, before the next is read.
func (c *Context) typedInputs(want wire.DataType, ts []*wire.Tensor) error {
	for i := range ts {
		var err error
		if ts[i], err = c.typed(i, want); err != nil {
			return err
		}
	}
	return nil
}

// resource returns the variable input i refers to.
func (c *Context) resource(i int) (*variable, error) {
	if c.In[i].v == nil {
		return nil, status.Errorf(wire.InvalidArgument, "input %d is %v, not a variable", i, c.In[i].T.DType)
	}
	return c.In[i].v, nil
}

// variableAndInput returns the variable of input 0 and the tensor of input
// 1, the two inputs every op that writes or indexes one variable starts
// with.
func (c *Context) variableAndInput() (*variable, *wire.Tensor, error) {
	v, err := c.resource(0)
	if err != nil {
		return nil, nil, err
	}
	t, err := c.input(1)
	if err != nil {
		return nil, nil, err
	}
	return v, t, nil
}

// setOut makes t output i; the step takes over t.Buf.
func (c *Context) setOut(i int, t wire.Tensor) { c.Out[i] = Value{T: t, Set: true} }

// forward makes output i share input i's tensor (a new reference).
func (c *Context) forward(out int, t *wire.Tensor) {
	c.setOut(out, tensor.Ref(*t))
}
