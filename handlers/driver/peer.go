package driver

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// Both Callers carry a master's calls and a worker's to its peers.
var (
	_ Caller = (*StarCaller)(nil)
	_ Caller = (*GRPCCaller)(nil)
)

// Call implements handlers.Caller: it makes any starwire call and counts it.
func (s *StarCaller) Call(ctx context.Context, m rpc.Method, req *rpc.Request, resp *rpc.Reply) error {
	if err := s.c.Call(ctx, m, req, resp); err != nil {
		return err
	}
	n := len(req.Meta) + len(resp.Meta)
	for i := range req.Tensors {
		n += req.Tensors[i].ByteLen()
	}
	for i := range resp.Tensors {
		n += resp.Tensors[i].ByteLen()
	}
	s.n.add(n)
	return nil
}

// Call implements handlers.Caller for the methods a worker makes to its
// peers, RecvTensor and FuseRecvTensor, by making the gRPC RecvTensor call
// (one per key) and presenting the answer in starwire's encoding: the
// response metadata without tensor_content, the bytes as resp.Tensors. The
// tensors point into the gRPC responses (no Buf), so resp.Alloc is not
// consulted. Other methods are Unimplemented.
func (g *GRPCCaller) Call(ctx context.Context, m rpc.Method, req *rpc.Request, resp *rpc.Reply) error {
	resp.Release()
	switch m.ID {
	case handlers.MethodRecvTensor.ID:
		var r tfpb.RecvTensorRequest
		if err := proto.Unmarshal(req.Meta, &r); err != nil {
			return status.Errorf(wire.InvalidArgument, "RecvTensor over grpc: decode request: %v", err)
		}
		meta, t, err := g.recvOne(ctx, &r, nil)
		if err != nil {
			return err
		}
		resp.Meta, resp.Tensors = meta, []wire.Tensor{t}
		return nil
	case handlers.MethodFuseRecvTensor.ID:
		return g.fuseRecv(ctx, req.Meta, resp)
	}
	return status.Errorf(wire.Unimplemented, "%s is not carried over grpc between workers", m.Name)
}

// recvOne makes one gRPC RecvTensor and splits the answer into metadata
// (appended to dst) and the tensor.
func (g *GRPCCaller) recvOne(ctx context.Context, r *tfpb.RecvTensorRequest, dst []byte) ([]byte, wire.Tensor, error) {
	out, err := g.c.RecvTensor(ctx, r)
	if err != nil {
		return nil, wire.Tensor{}, g.wrap("RecvTensor", err)
	}
	g.count(r, out)
	t, err := tensorView(out.GetTensor())
	if err != nil {
		return nil, wire.Tensor{}, fmt.Errorf("driver: RecvTensor on %s: %w", g.task, err)
	}
	t.Dead = out.GetIsDead()
	if out.Tensor != nil {
		out.Tensor.TensorContent = nil
	}
	meta, err := proto.MarshalOptions{}.MarshalAppend(dst, out)
	if err != nil {
		return nil, wire.Tensor{}, fmt.Errorf("driver: RecvTensor on %s: encode response: %w", g.task, err)
	}
	if t.Dead {
		t = wire.Tensor{DType: t.DType, Shape: []int64{0}, Dead: true, Data: []byte{}}
	}
	return meta, t, nil
}

// fuseRecv serves FuseRecvTensor with concurrent RecvTensor calls.
func (g *GRPCCaller) fuseRecv(ctx context.Context, meta []byte, resp *rpc.Reply) error {
	var reqs []*tfpb.RecvTensorRequest
	for b := meta; len(b) > 0; {
		m, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return status.Errorf(wire.InvalidArgument, "FuseRecvTensor over grpc: decode request %d: %v", len(reqs), protowire.ParseError(n))
		}
		b = b[n:]
		r := new(tfpb.RecvTensorRequest)
		if err := proto.Unmarshal(m, r); err != nil {
			return status.Errorf(wire.InvalidArgument, "FuseRecvTensor over grpc: decode request %d: %v", len(reqs), err)
		}
		reqs = append(reqs, r)
	}
	metas := make([][]byte, len(reqs))
	tensors := make([]wire.Tensor, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			metas[i], tensors[i], errs[i] = g.recvOne(ctx, r, nil)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var out []byte
	for _, m := range metas {
		out = protowire.AppendBytes(out, m)
	}
	resp.Meta, resp.Tensors = out, tensors
	return nil
}
