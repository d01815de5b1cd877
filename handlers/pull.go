package handlers

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
)

// A pull is the state of one RecvTensor call made by a worker: the request
// metadata, the reply, and where the reply's Alloc lands the tensor. Pulls
// are pooled, so that a steady-state pull allocates nothing.
type pull struct {
	meta  []byte
	req   rpc.Request
	reply rpc.Reply
	into  []byte // the caller's destination, if any
}

var pulls = sync.Pool{New: func() any {
	p := new(pull)
	p.reply.Alloc = p.alloc
	return p
}}

// alloc runs on the connection's receiving goroutine once the response's
// descriptor is known: the tensor's bytes land in the caller's destination
// when it has exactly their length, else in a pooled, aligned buffer.
func (p *pull) alloc(in *wire.Inbound) error {
	if len(in.Tensors) != 1 {
		return status.Errorf(wire.DataLoss, "RecvTensor: %d tensors in the response", len(in.Tensors))
	}
	if t := &in.Tensors[0]; p.into != nil && t.ByteLen() == len(p.into) {
		t.Data = p.into
		return nil
	}
	in.AllocPooled()
	return nil
}

// recvTensorInto pulls key's tensor of step with RecvTensor through c and
// puts it in dst, decoding the response in place. dst.Shape's storage is
// reused for the shape. When dst.Data has exactly the tensor's length, the
// bytes land in it and dst.Buf is left alone; otherwise they land in a fresh
// pooled, aligned buffer whose reference is put in dst.Buf (which must be
// nil then) for the caller to release. A dead tensor has no data. It
// returns when the sender sent the tensor (micros since the epoch). With a
// Caller that consults Reply.Alloc (an *rpc.Client), a call allocates
// nothing once the pools are warm.
func recvTensorInto(ctx context.Context, c Caller, step int64, key string, dst *wire.Tensor) (int64, error) {
	p := pulls.Get().(*pull)
	defer pulls.Put(p)
	p.meta = appendRecvTensorRequest(p.meta[:0], step, key)
	p.req.Meta, p.into = p.meta, dst.Data
	err := c.Call(ctx, MethodRecvTensor, &p.req, &p.reply)
	p.into = nil
	if err != nil {
		p.reply.Release()
		return 0, err
	}
	start, err := p.take(dst)
	p.reply.Release()
	return start, err
}

// take moves the reply's tensor into dst; the reply still has to be
// released.
func (p *pull) take(dst *wire.Tensor) (int64, error) {
	resp, err := parseRecvTensorResponse(p.reply.Meta)
	if err != nil {
		return 0, err
	}
	if len(p.reply.Tensors) != 1 {
		return 0, fmt.Errorf("handlers: RecvTensor: %d tensors in the response", len(p.reply.Tensors))
	}
	src := &p.reply.Tensors[0]
	dst.DType, dst.Dead = src.DType, resp.isDead || src.Dead
	if dst.Dead {
		dst.Shape, dst.Data = dst.Shape[:0], nil
		return resp.sendStart, nil
	}
	dst.Shape = append(dst.Shape[:0], src.Shape...)
	switch {
	case len(dst.Data) > 0 && len(src.Data) == len(dst.Data) && sameMemory(src.Data, dst.Data):
		// alloc landed the bytes in the caller's destination.
	case dst.Data != nil && len(src.Data) == len(dst.Data):
		copy(dst.Data, src.Data) // the Caller did not consult alloc
	case src.Buf != nil:
		dst.Buf, dst.Data = src.Buf, src.Data
		src.Buf = nil // the reference moves to dst
	case tensor.Aligned(src):
		dst.Data = src.Data // memory of the Caller's own, kept by the GC
	default:
		c := tensor.Copy(src)
		dst.Buf, dst.Data = c.Buf, c.Data
	}
	return resp.sendStart, nil
}

// sameMemory reports whether a and b start at the same byte.
func sameMemory(a, b []byte) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }

// remoteRecv pulls a tensor from task's rendezvous with RecvTensor, for a
// remote _Recv (it is the ops.Env's RemoteRecv). The tensor lands in a
// pooled buffer whose reference moves to the caller.
func (w *Worker) remoteRecv(ctx context.Context, task string, step int64, key string) (wire.Tensor, error) {
	caller, err := w.opts.Resolver(task)
	if err != nil {
		return wire.Tensor{}, status.Errorf(wire.Unavailable, "resolve %s: %v", task, err)
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
