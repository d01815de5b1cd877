package eager

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/graph"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Functions run on the graph executor: a call of function F with inputs
// x0..xn becomes a graph of one node per input and a call node "call" of
// F, which the executor inlines (see package graph). A tensor input is a
// Placeholder fed with the tensor; a resource input is a VarHandleOp of the
// resource's container and shared name, so that the function's reads and
// updates reach the very variable the handle names. The outputs are
// fetched as "call:i". A component function's _Send and _Recv nodes meet
// their peers on other tasks under the operation's func_step_id, which is
// the step the graph runs as; a whole function runs as a random step,
// cleaned up when it returns.

// A builtCall is a function's graph for one kind of inputs, and the feed
// names of its tensor inputs.
type builtCall struct {
	g       *graph.Graph
	feeds   []string // by input; "" for a resource
	fetches []string
}

// registerFunction keeps a function, with the library it needs, for later
// operations and RunComponentFunction calls.
func (c *serverContext) registerFunction(op *tfpb.RegisterFunctionOp) error {
	name := op.GetFunctionDef().GetSignature().GetName()
	if name == "" {
		return status.Errorf(wire.InvalidArgument, "RegisterFunctionOp: the function has no name")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return status.Errorf(wire.Aborted, "context %d was closed", c.id)
	}
	if old := c.functions[name]; old != nil && proto.Equal(old.def, op.GetFunctionDef()) {
		return nil // registered again, as clients do per instantiation
	}
	c.functions[name] = &function{def: op.GetFunctionDef(), lib: op.GetLibrary(), component: op.GetIsComponentFunction(), graphs: make(map[string]*builtCall)}
	return nil
}

func (c *serverContext) removeFunction(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.functions[name] == nil {
		return status.Errorf(wire.InvalidArgument, "Tried to remove non-existent function '%s'.", name)
	}
	delete(c.functions, name)
	return nil
}

func (c *serverContext) hasFunction(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.functions[name] != nil
}

// RunComponentFunction runs a registered component function: the part of a
// multi-device function placed on this task. Outputs are kept as handles
// (op id, output_num[i]) and their shapes answered, or, for the invalid op
// id, answered as tensors.
func (s *Service) RunComponentFunction(ctx context.Context, req *tfpb.RunComponentFunctionRequest) (*tfpb.RunComponentFunctionResponse, error) {
	c, err := s.context(req.GetContextId())
	if err != nil {
		return nil, err
	}
	op := req.GetOperation()
	if !op.GetIsFunction() || !op.GetIsComponentFunction() {
		return nil, status.Errorf(wire.Internal, "RunComponentFunction request can only be used to execute component functions.")
	}
	if err := s.checkDevice(op.GetDevice()); err != nil {
		return nil, err
	}
	outs, err := s.runFunction(ctx, c, op)
	if err != nil {
		return nil, err
	}
	resp := &tfpb.RunComponentFunctionResponse{}
	err = s.answer(c, op.GetId(), req.GetOutputNum(), outs, func(p *tfpb.TensorShapeProto, t *tfpb.TensorProto) {
		if t != nil {
			resp.Tensor = append(resp.Tensor, t)
		} else {
			resp.Shape = append(resp.Shape, p)
		}
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// runFunction runs the function op calls and returns its outputs.
func (s *Service) runFunction(ctx context.Context, c *serverContext, op *tfpb.Operation) ([]*handle, error) {
	c.mu.Lock()
	f := c.functions[op.GetName()]
	c.mu.Unlock()
	if f == nil {
		if op.GetIsComponentFunction() {
			return nil, status.Errorf(wire.Internal, "Could not find function library for registered component function: %s", op.GetName())
		}
		return nil, status.Errorf(wire.NotFound, "Function %s is not registered on %s", op.GetName(), s.task)
	}
	in, res, release, err := s.inputs(c, op)
	if err != nil {
		return nil, wrapStatus(err, "function %s (operation %d)", op.GetName(), op.GetId())
	}
	defer release()
	call, err := s.callGraph(c, f, op, in, res)
	if err != nil {
		return nil, err
	}
	req := &tfpb.RunGraphRequest{StepId: op.GetFuncStepId(), GraphHandle: op.GetName(), RecvKey: call.fetches}
	var feeds []wire.Tensor
	for i, name := range call.feeds {
		if name != "" {
			req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: name})
			feeds = append(feeds, in[i].T)
		}
	}
	if !op.GetIsComponentFunction() {
		// A whole function runs as a step of its own, which no other
		// task shares: a failure aborts that step only.
		req.StepId = rand.Int64()
		defer s.opts.Env.Rendezvous.Cleanup(req.StepId, errFunctionCleaned)
	}
	got, _, err := call.g.Run(ctx, req, feeds, false)
	if err != nil {
		return nil, wrapStatus(err, "function %s (operation %d)", op.GetName(), op.GetId())
	}
	outs := make([]*handle, len(got))
	for i := range got {
		outs[i] = &handle{v: ops.Value{T: got[i], Set: true}}
	}
	return outs, nil
}

// callGraph returns the graph that calls f with inputs of in's kinds,
// building it the first time.
func (s *Service) callGraph(c *serverContext, f *function, op *tfpb.Operation, in []ops.Value, res []*resource) (*builtCall, error) {
	sig := f.def.GetSignature()
	if len(in) != len(sig.GetInputArg()) {
		return nil, status.Errorf(wire.InvalidArgument, "function %s takes %d inputs, operation %d gives %d", op.GetName(), len(sig.GetInputArg()), op.GetId(), len(in))
	}
	var key strings.Builder
	ri := 0
	for i := range in {
		if in[i].IsResource() {
			if ri >= len(res) {
				return nil, status.Errorf(wire.InvalidArgument, "function %s: input %d is a resource the task did not make", op.GetName(), i)
			}
			key.WriteString("r:" + res[ri].container + "/" + res[ri].name + ";")
			ri++
			continue
		}
		key.WriteString("t:" + strconv.Itoa(int(in[i].T.DType)) + ";")
	}
	c.mu.Lock()
	b := f.graphs[key.String()]
	c.mu.Unlock()
	if b != nil {
		return b, nil
	}
	b, err := s.buildCall(f, op, in, res)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(f.graphs) >= maxGraphsPerFunction {
		clear(f.graphs)
	}
	f.graphs[key.String()] = b
	c.mu.Unlock()
	return b, nil
}

// buildCall builds the graph calling f (see the comment at the top).
func (s *Service) buildCall(f *function, op *tfpb.Operation, in []ops.Value, res []*resource) (*builtCall, error) {
	b := &builtCall{feeds: make([]string, len(in))}
	def := &tfpb.GraphDef{Library: &tfpb.FunctionDefLibrary{}}
	call := &tfpb.NodeDef{Name: "call", Op: op.GetName(), Attr: op.GetAttrs(), Device: s.device()}
	ri := 0
	for i := range in {
		name := "input_" + strconv.Itoa(i)
		var n *tfpb.NodeDef
		if in[i].IsResource() {
			r := res[ri]
			ri++
			n = &tfpb.NodeDef{Name: name, Op: "VarHandleOp", Attr: map[string]*tfpb.AttrValue{
				"container": {Value: &tfpb.AttrValue_S{S: []byte(r.container)}}, "shared_name": {Value: &tfpb.AttrValue_S{S: []byte(r.name)}},
				"dtype": r.dtype, "shape": r.shape}}
			if r.dtype == nil || r.shape == nil {
				return nil, status.Errorf(wire.InvalidArgument, "function %s: input %d is a resource without dtype and shape", op.GetName(), i)
			}
		} else {
			b.feeds[i] = name
			n = &tfpb.NodeDef{Name: name, Op: "Placeholder", Attr: map[string]*tfpb.AttrValue{"dtype": {Value: &tfpb.AttrValue_Type{Type: tfpb.DataType(in[i].T.DType)}}}}
		}
		n.Device = s.device()
		def.Node = append(def.Node, n)
		call.Input = append(call.Input, name)
	}
	def.Node = append(def.Node, call)
	def.Library.Function = append(def.Library.Function, f.def)
	for _, g := range f.lib.GetFunction() {
		if g.GetSignature().GetName() != f.def.GetSignature().GetName() {
			def.Library.Function = append(def.Library.Function, g)
		}
	}
	def.Library.Gradient = f.lib.GetGradient()
	for i := range f.def.GetSignature().GetOutputArg() {
		b.fetches = append(b.fetches, "call:"+strconv.Itoa(i))
	}
	g, err := graph.Build(def, s.opts.Env)
	if err != nil {
		return nil, wrapStatus(err, "function %s", op.GetName())
	}
	b.g = g
	return b, nil
}
