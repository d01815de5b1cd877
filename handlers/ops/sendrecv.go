package ops

import (
	"fmt"

	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

func init() {
	defaults := map[string]*tfpb.AttrValue{"client_terminated": boolAttr(false)}
	send := []TypeAttr{anyType("T")}
	registerOp("_Send", &Spec{Defaults: defaults, Sends: true, Inputs: exactly(1), Types: send, NumOutputs: exactly(0), Build: buildSend})
	registerOp("_HostSend", &Spec{Defaults: defaults, Sends: true, Inputs: exactly(1), Types: send, NumOutputs: exactly(0), Build: buildSend})
	recv := []TypeAttr{anyType("tensor_type")}
	registerOp("_Recv", &Spec{Defaults: defaults, Async: true, Inputs: exactly(0), Types: recv, NumOutputs: exactly(1), Build: buildRecv})
	registerOp("_HostRecv", &Spec{Defaults: defaults, Async: true, Inputs: exactly(0), Types: recv, NumOutputs: exactly(1), Build: buildRecv})
}

// sendRecvKey reads the attributes _Send and _Recv share and sets n.Key
// and n.ClientTerminated.
func sendRecvKey(n *Node) error {
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
	if n.ClientTerminated, err = n.attrBool("client_terminated"); err != nil {
		return err
	}
	n.Key = rendezvous.CreateKey(src, uint64(inc), dst, name, rendezvous.FrameIter{})
	if _, err := rendezvous.ParseKey(n.Key); err != nil {
		return err
	}
	return nil
}

// buildSend builds _Send: the tensor goes into this worker's rendezvous,
// where a local _Recv, a remote task's RecvTensor or the RunGraph caller
// (client_terminated) takes it.
func buildSend(env *Env, n *Node) (Kernel, error) {
	if err := sendRecvKey(n); err != nil {
		return nil, err
	}
	p, _ := rendezvous.ParseKey(n.Key)
	if !n.ClientTerminated && p.Src.TaskName() != env.Task {
		return nil, fmt.Errorf("send_device %s is not on this task %s", p.SrcDevice, env.Task)
	}
	return func(c *Context) error {
		t, err := c.input(0)
		if err != nil {
			return err
		}
		return env.Rendezvous.Send(c.Step, n.Key, tensor.Ref(*t))
	}, nil
}

// buildRecv builds _Recv: from this worker's rendezvous when the sender is
// local or the RunGraph caller, else through RecvTensor on the sender's task.
func buildRecv(env *Env, n *Node) (Kernel, error) {
	dt := n.typeOf("tensor_type")
	if err := sendRecvKey(n); err != nil {
		return nil, err
	}
	n.FeedType = dt
	if n.ClientTerminated {
		if s, err := n.attrShape("shape"); err == nil {
			n.FeedShape = s
		} else if a := n.Attrs["_output_shapes"]; a != nil && len(a.GetList().GetShape()) == 1 {
			n.FeedShape = partialShape(a.GetList().GetShape()[0])
		}
	}
	p, _ := rendezvous.ParseKey(n.Key)
	remoteTask := "" // the sender's task, when it is not this one
	if !n.ClientTerminated && p.Src.TaskName() != env.Task {
		if env.RemoteRecv == nil {
			return nil, fmt.Errorf("send_device %s is on another task and the worker has no resolver", p.SrcDevice)
		}
		remoteTask = p.Src.TaskName()
	}
	return func(c *Context) error {
		var t wire.Tensor
		var err error
		if remoteTask != "" {
			t, err = env.RemoteRecv(c.Ctx, remoteTask, c.Step, n.Key)
		} else {
			t, _, err = env.Rendezvous.Recv(c.Ctx, c.Step, n.Key)
		}
		if err != nil {
			return err
		}
		if t.DType != dt && !t.Dead {
			t.Buf.Release()
			return status.Errorf(wire.InvalidArgument, "received %v, tensor_type is %v", t.DType, dt)
		}
		c.setOut(0, t)
		return nil
	}, nil
}
