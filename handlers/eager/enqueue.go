package eager

import (
	"context"
	"fmt"
	"strconv"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// anonymousName is the shared_name of TensorFlow's anonymous resources
// (ResourceHandle::ANONYMOUS_NAME): an eager VarHandleOp naming it makes a
// variable of its own, which lives as long as its handle.
const anonymousName = "cd2c89b7-88b7-44c8-ad83-06c2a9158347"

// Enqueue runs the request's items in order, answering one QueueResponse
// per item run; the first failure ends the request with its error, as in
// TensorFlow.
func (s *Service) Enqueue(ctx context.Context, req *tfpb.EnqueueRequest) (*tfpb.EnqueueResponse, error) {
	c, err := s.context(req.GetContextId())
	if err != nil {
		return nil, err
	}
	resp := &tfpb.EnqueueResponse{QueueResponse: make([]*tfpb.QueueResponse, 0, len(req.GetQueue()))}
	for i, item := range req.GetQueue() {
		qr := &tfpb.QueueResponse{}
		resp.QueueResponse = append(resp.QueueResponse, qr)
		if err := s.runItem(ctx, c, item, qr); err != nil {
			if len(req.GetQueue()) > 1 {
				err = wrapStatus(err, "queue item %d", i)
			}
			return nil, err
		}
	}
	return resp, nil
}

// runItem runs one queue item.
func (s *Service) runItem(ctx context.Context, c *serverContext, item *tfpb.QueueItem, qr *tfpb.QueueResponse) error {
	switch it := item.GetItem().(type) {
	case *tfpb.QueueItem_Operation:
		return s.executeOp(ctx, c, it.Operation, qr)
	case *tfpb.QueueItem_HandleToDecref:
		c.decref(s.opts.Env, handleKey{it.HandleToDecref.GetOpId(), it.HandleToDecref.GetOutputNum()})
		return nil
	case *tfpb.QueueItem_SendTensor:
		return s.sendTensor(c, it.SendTensor)
	case *tfpb.QueueItem_RegisterFunction:
		return c.registerFunction(it.RegisterFunction)
	case *tfpb.QueueItem_RemoveFunction:
		return c.removeFunction(it.RemoveFunction.GetFunctionName())
	case *tfpb.QueueItem_CleanupFunction:
		s.opts.Env.Rendezvous.Cleanup(it.CleanupFunction.GetStepId(), errFunctionCleaned)
		return nil
	case *tfpb.QueueItem_SyncRemoteExecutorForStream:
		return nil // operations run synchronously: nothing is pending
	case *tfpb.QueueItem_SendPackedHandle:
		return status.Errorf(wire.Unimplemented, "EagerService:Enqueue: SendPackedHandleOp (packed handles of replicated functions) is not supported on %s", s.task)
	default:
		return status.Errorf(wire.InvalidArgument, "EagerService:Enqueue: empty queue item")
	}
}

// errFunctionCleaned fails what still waits in the rendezvous of a
// function call the client cleaned up.
var errFunctionCleaned = status.Errorf(wire.Aborted, "the function's step was cleaned up (CleanupFunctionOp)")

// wrapStatus adds context to err's message, keeping its code.
func wrapStatus(err error, format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// sendTensor keeps the op's tensors as its outputs.
func (s *Service) sendTensor(c *serverContext, op *tfpb.SendTensorOp) error {
	if err := s.checkDevice(op.GetDeviceName()); err != nil {
		return err
	}
	for i, p := range op.GetTensors() {
		t, err := tensor.FromProto(p)
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "Unable to parse tensor proto: SendTensorOp %d, tensor %d: %v", op.GetOpId(), i, err)
		}
		if err := c.add(s.opts.Env, handleKey{op.GetOpId(), int32(i)}, &handle{v: ops.Value{T: t, Set: true}}); err != nil {
			return err
		}
	}
	return nil
}

// checkDevice refuses a device that is not one of the task's.
func (s *Service) checkDevice(name string) error {
	if name == "" {
		return nil
	}
	d, err := rendezvous.ParseDevice(name)
	if err != nil {
		return status.Errorf(wire.InvalidArgument, "invalid device %q: %v", name, err)
	}
	if d.TaskName() != s.task {
		return status.Errorf(wire.InvalidArgument, "device %q is not on %s", name, s.task)
	}
	return nil
}

// executeOp runs one operation: a function call (see runFunction), or a
// single op, run as the graph executor runs a node: its kernel built from
// the operation's attributes, its inputs the context's handles or the
// tensors the operation carries. Its outputs stay on the task under
// (operation id, output index) and the response carries their shapes.
func (s *Service) executeOp(ctx context.Context, c *serverContext, op *tfpb.Operation, qr *tfpb.QueueResponse) error {
	if err := s.checkDevice(op.GetDevice()); err != nil {
		return wrapStatus(err, "operation %d (%s)", op.GetId(), op.GetName())
	}
	if op.GetIsFunction() || c.hasFunction(op.GetName()) {
		outs, err := s.runFunction(ctx, c, op)
		if err != nil {
			return err
		}
		return s.answer(c, op.GetId(), nil, outs, func(p *tfpb.TensorShapeProto, t *tfpb.TensorProto) {
			if t != nil {
				qr.Tensor = append(qr.Tensor, t)
				return
			}
			qr.Shape = append(qr.Shape, p)
			qr.Device = append(qr.Device, s.device())
		})
	}
	outs, err := s.runOp(ctx, c, op)
	if err != nil {
		return err
	}
	return s.answer(c, op.GetId(), nil, outs, func(p *tfpb.TensorShapeProto, t *tfpb.TensorProto) {
		if t != nil {
			qr.Tensor = append(qr.Tensor, t)
		} else {
			qr.Shape = append(qr.Shape, p)
		}
	})
}

// device is the task's device name.
func (s *Service) device() string {
	if len(s.opts.Devices) > 0 {
		return s.opts.Devices[0].GetName()
	}
	return s.task + "/device:CPU:0"
}

// invalidOpID is the op id of an operation whose outputs are answered as
// tensors rather than kept (kInvalidOpId).
const invalidOpID = -1

// answer keeps outs under op id's handles (output nums[i], or i), putting
// each one's shape in the response; for the invalid op id it answers the
// tensors themselves. It takes outs' references.
func (s *Service) answer(c *serverContext, id int64, nums []int32, outs []*handle, add func(*tfpb.TensorShapeProto, *tfpb.TensorProto)) error {
	if id == invalidOpID {
		var first error
		for _, h := range outs {
			p, err := tensor.ToProto(&h.v.T)
			if err != nil && first == nil {
				first = status.Errorf(wire.Internal, "output of operation: %v", err)
			}
			if err == nil {
				add(nil, p)
			}
			h.release(s.opts.Env)
		}
		return first
	}
	var first error
	for i, h := range outs {
		add(shapeOf(h), nil)
		num := int32(i)
		if i < len(nums) {
			num = nums[i]
		}
		if err := c.add(s.opts.Env, handleKey{id, num}, h); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// shapeOf is the shape TensorFlow answers for a handle: a resource
// handle is a scalar.
func shapeOf(h *handle) *tfpb.TensorShapeProto {
	if h.v.IsResource() {
		return &tfpb.TensorShapeProto{}
	}
	return tensor.ShapeToProto(h.v.T.Shape)
}

// runOp runs a single op and returns its outputs.
func (s *Service) runOp(ctx context.Context, c *serverContext, op *tfpb.Operation) ([]*handle, error) {
	fail := func(err error) ([]*handle, error) {
		return nil, wrapStatus(err, "operation %d (%s)", op.GetId(), op.GetName())
	}
	spec := ops.Lookup(op.GetName())
	if spec == nil {
		return nil, status.Errorf(wire.NotFound, "Op type not registered '%s' in binary running on %s. Make sure the Op and Kernel are registered in the binary running in this process. (EagerService: operation %d)", op.GetName(), s.host(), op.GetId())
	}
	n := &ops.Node{Name: op.GetName() + "_" + strconv.FormatInt(op.GetId(), 10), Op: op.GetName(),
		Attrs: make(map[string]*tfpb.AttrValue, len(spec.Defaults)+len(op.GetAttrs())), NumInputs: len(op.GetOpInputs())}
	for k, v := range spec.Defaults {
		n.Attrs[k] = v
	}
	for k, v := range op.GetAttrs() {
		n.Attrs[k] = v
	}
	res := s.anonymous(c, n)
	kernel, err := spec.Kernel(s.opts.Env, n)
	if err != nil {
		return fail(status.Errorf(wire.InvalidArgument, "%v", err))
	}
	in, inRes, release, err := s.inputs(c, op)
	if err != nil {
		return fail(err)
	}
	defer release()
	kc := &ops.Context{Ctx: ctx, Step: int64(c.id), In: in, Out: make([]ops.Value, n.NumOutputs)}
	if err := kc.Run(kernel); err != nil {
		for i := range kc.Out {
			if kc.Out[i].T.Buf != nil {
				kc.Out[i].T.Buf.Release()
			}
		}
		if status.CodeOf(err) == wire.Unknown {
			err = status.Errorf(wire.Internal, "%v", err)
		}
		return fail(err)
	}
	outs := make([]*handle, len(kc.Out))
	for i := range kc.Out {
		h := &handle{v: kc.Out[i]}
		if h.v.IsResource() {
			h.res = res
			if res == nil && len(inRes) > 0 {
				h.res = inRes[0] // an op passing a resource on (Identity)
			}
		}
		outs[i] = h
	}
	return outs, nil
}

func (s *Service) host() string {
	if s.opts.Env.Host == "" {
		return "this task"
	}
	return s.opts.Env.Host
}

// anonymous gives an anonymous VarHandleOp a variable of its own, in the
// context's container, and returns the resource it makes; for a named
// one it returns the resource it names. Other ops make no resource.
func (s *Service) anonymous(c *serverContext, n *ops.Node) *resource {
	if n.Op != "VarHandleOp" {
		return nil
	}
	r := &resource{container: string(n.Attrs["container"].GetS()), name: string(n.Attrs["shared_name"].GetS()), dtype: n.Attrs["dtype"], shape: n.Attrs["shape"]}
	if r.name == anonymousName || r.name == "" {
		r.container, r.name, r.owned = c.container(), "var_"+strconv.FormatUint(s.varName(), 10), true
		n.Attrs["container"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(r.container)}}
		n.Attrs["shared_name"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_S{S: []byte(r.name)}}
	}
	return r
}

// inputs returns the operation's inputs as values, and the resources of
// those that are resource handles; release gives back the inputs'
// references.
func (s *Service) inputs(c *serverContext, op *tfpb.Operation) (in []ops.Value, res []*resource, release func(), err error) {
	var inline []wire.Tensor
	release = func() { tensor.ReleaseAll(inline) }
	in = make([]ops.Value, len(op.GetOpInputs()))
	for i, input := range op.GetOpInputs() {
		switch x := input.GetItem().(type) {
		case *tfpb.Operation_Input_RemoteHandle:
			h, err := c.lookup(handleKey{x.RemoteHandle.GetOpId(), x.RemoteHandle.GetOutputNum()})
			if err != nil {
				release()
				return nil, nil, nil, err
			}
			// The input holds a reference of its own: the client may drop
			// the handle while the op runs.
			in[i] = h.v
			if h.v.T.Buf != nil {
				in[i].T = tensor.Ref(h.v.T)
				inline = append(inline, in[i].T)
			}
			if h.res != nil {
				res = append(res, h.res)
			}
		case *tfpb.Operation_Input_Tensor:
			t, err := tensor.FromProto(x.Tensor)
			if err != nil {
				release()
				return nil, nil, nil, status.Errorf(wire.InvalidArgument, "Invalid TensorProto: input %d: %v", i, err)
			}
			inline = append(inline, t)
			in[i] = ops.Value{T: t, Set: true}
		default:
			release()
			return nil, nil, nil, status.Errorf(wire.InvalidArgument, "input %d is neither a remote handle nor a tensor", i)
		}
	}
	return in, res, release, nil
}
