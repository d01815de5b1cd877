package handlers

import (
	"context"
	"fmt"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	defaults := map[string]*tfpb.AttrValue{"client_terminated": boolAttr(false)}
	registerOp("_Send", &opSpec{defaults: defaults, build: buildSend})
	registerOp("_Recv", &opSpec{defaults: defaults, async: true, build: buildRecv})
	registerOp("_HostSend", &opSpec{defaults: defaults, build: buildSend})
	registerOp("_HostRecv", &opSpec{defaults: defaults, async: true, build: buildRecv})
}

// sendRecvKey reads the attributes _Send and _Recv share and sets n.key
// and n.clientTerm.
func sendRecvKey(n *node) error {
	name, err := n.attrString("tensor_name")
	if err != nil {
		return err
	}
	src, err := n.attrString("send_device")
	if err != nil {
		return err
	}
	inc, err := n.attrInt("send_device_incarnation")
	if err != nil {
		return err
	}
	dst, err := n.attrString("recv_device")
	if err != nil {
		return err
	}
	if n.clientTerm, err = n.attrBool("client_terminated"); err != nil {
		return err
	}
	n.key = CreateKey(src, uint64(inc), dst, name, FrameIter{})
	if _, err := ParseKey(n.key); err != nil {
		return err
	}
	return nil
}

// buildSend builds _Send: the tensor goes into this worker's rendezvous,
// where a local _Recv, a remote task's RecvTensor or the RunGraph caller
// (client_terminated) takes it.
func buildSend(w *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(1); err != nil {
		return nil, err
	}
	if _, err := n.attrType("T"); err != nil {
		return nil, err
	}
	if err := sendRecvKey(n); err != nil {
		return nil, err
	}
	p, _ := ParseKey(n.key)
	if !n.clientTerm && p.Src.TaskName() != w.task {
		return nil, fmt.Errorf("send_device %s is not on this task %s", p.SrcDevice, w.task)
	}
	return func(c *opCtx) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		return c.s.w.rendezvous.Send(c.s.id, c.n.key, refTensor(*t))
	}, nil
}

// buildRecv builds _Recv: from this worker's rendezvous when the sender is
// local or the RunGraph caller, else through RecvTensor on the sender's task.
func buildRecv(w *Worker, n *node) (kernel, error) {
	if err := n.wantInputs(0); err != nil {
		return nil, err
	}
	dt, err := n.attrType("tensor_type")
	if err != nil {
		return nil, err
	}
	if err := sendRecvKey(n); err != nil {
		return nil, err
	}
	n.feedType = dt
	if n.clientTerm {
		if s, err := n.attrShape("shape"); err == nil {
			n.feedShape = s
		} else if a := n.attrs["_output_shapes"]; a != nil && len(a.GetList().GetShape()) == 1 {
			n.feedShape = partialShape(a.GetList().GetShape()[0])
		}
	}
	p, _ := ParseKey(n.key)
	if !n.clientTerm && p.Src.TaskName() != w.task {
		if w.opts.Resolver == nil {
			return nil, fmt.Errorf("send_device %s is on another task and the worker has no resolver", p.SrcDevice)
		}
		n.remoteTask = p.Src.TaskName()
	}
	n.nouts = 1
	return func(c *opCtx) error {
		var t wire.Tensor
		var err error
		if c.n.remoteTask != "" {
			t, err = c.s.w.remoteRecv(c.ctx, c.n.remoteTask, c.s.id, c.n.key)
		} else {
			t, _, err = c.s.w.rendezvous.Recv(c.ctx, c.s.id, c.n.key)
		}
		if err != nil {
			return err
		}
		if t.DType != dt && !t.Dead {
			t.Buf.Release()
			return rpc.Errorf(wire.InvalidArgument, "received %v, tensor_type is %v", t.DType, dt)
		}
		c.setOut(0, t)
		return nil
	}, nil
}

// remoteRecv pulls a tensor from task's rendezvous with RecvTensor. The
// tensor lands in a pooled buffer whose reference moves to the caller.
func (w *Worker) remoteRecv(ctx context.Context, task string, step int64, key string) (wire.Tensor, error) {
	caller, err := w.opts.Resolver(task)
	if err != nil {
		return wire.Tensor{}, rpc.Errorf(wire.Unavailable, "resolve %s: %v", task, err)
	}
	var t wire.Tensor
	if _, err := recvTensorInto(ctx, caller, step, key, &t); err != nil {
		return wire.Tensor{}, err
	}
	if t.Dead {
		return wire.Tensor{DType: t.DType, Dead: true}, nil
	}
	return t, nil
}
