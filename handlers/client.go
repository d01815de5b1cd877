package handlers

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A WorkerClient calls a remote Worker's WorkerService over starwire, with
// the tensor encoding of the package doc. Methods without tensors go
// through the generated WorkerServiceStarwireClient. Safe for concurrent use.
type WorkerClient struct {
	c   *rpc.Client
	gen WorkerServiceStarwireClient
}

// NewWorkerClient returns a client calling through c.
func NewWorkerClient(c *rpc.Client) *WorkerClient {
	return &WorkerClient{c: c, gen: NewWorkerServiceStarwireClient(c)}
}

// GetStatus calls GetStatus.
func (c *WorkerClient) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	return c.gen.GetStatus(ctx, &tfpb.GetStatusRequest{})
}

// CreateWorkerSession calls CreateWorkerSession.
func (c *WorkerClient) CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) (*tfpb.CreateWorkerSessionResponse, error) {
	return c.gen.CreateWorkerSession(ctx, req)
}

// DeleteWorkerSession calls DeleteWorkerSession.
func (c *WorkerClient) DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) (*tfpb.DeleteWorkerSessionResponse, error) {
	return c.gen.DeleteWorkerSession(ctx, req)
}

// RegisterGraph calls RegisterGraph.
func (c *WorkerClient) RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	return c.gen.RegisterGraph(ctx, req)
}

// DeregisterGraph calls DeregisterGraph.
func (c *WorkerClient) DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) (*tfpb.DeregisterGraphResponse, error) {
	return c.gen.DeregisterGraph(ctx, req)
}

// CleanupGraph calls CleanupGraph.
func (c *WorkerClient) CleanupGraph(ctx context.Context, step int64) error {
	_, err := c.gen.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
	return err
}

// CleanupAll calls CleanupAll.
func (c *WorkerClient) CleanupAll(ctx context.Context, containers ...string) error {
	_, err := c.gen.CleanupAll(ctx, &tfpb.CleanupAllRequest{Container: containers})
	return err
}

// RunGraph runs a registered graph. sends[i] is the tensor of req.Send[i]
// (whose Tensor field is not sent; when sends is nil, the Tensor fields are
// converted and sent instead). The fetched tensors are reply.Tensors, in
// the order of the response's Recv names and of req.RecvKey; they are valid
// until reply.Release.
func (c *WorkerClient) RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, sends []wire.Tensor, reply *rpc.Reply) (*tfpb.RunGraphResponse, error) {
	if sends == nil && len(req.GetSend()) > 0 {
		sends = make([]wire.Tensor, len(req.Send))
		defer tensor.ReleaseAll(sends)
		for i, s := range req.Send {
			t, err := tensor.FromProto(s.GetTensor())
			if err != nil {
				return nil, fmt.Errorf("handlers: RunGraph: send %q: %w", s.GetName(), err)
			}
			sends[i] = t
		}
	}
	if len(sends) != len(req.GetSend()) {
		return nil, fmt.Errorf("handlers: RunGraph: %d tensors for %d sends", len(sends), len(req.GetSend()))
	}
	names := make([]*tfpb.NamedTensorProto, len(req.GetSend()))
	for i, s := range req.GetSend() {
		names[i] = &tfpb.NamedTensorProto{Name: s.GetName()}
	}
	stripped := proto.CloneOf(req)
	stripped.Send = names
	meta, err := proto.MarshalOptions{}.MarshalAppend(nil, stripped)
	if err != nil {
		return nil, fmt.Errorf("handlers: RunGraph: encode request: %w", err)
	}
	if err := c.gen.RunGraph(ctx, &rpc.Request{Meta: meta, Tensors: sends}, reply); err != nil {
		return nil, err
	}
	resp := new(tfpb.RunGraphResponse)
	if err := proto.Unmarshal(reply.Meta, resp); err != nil {
		return nil, fmt.Errorf("handlers: RunGraph: decode response: %w", err)
	}
	if resp.GetStatusCode() == 0 && len(resp.Recv) != len(reply.Tensors) {
		return nil, fmt.Errorf("handlers: RunGraph: %d tensors for %d recvs", len(reply.Tensors), len(resp.Recv))
	}
	return resp, nil
}

// RecvTensor fetches one tensor from the remote rendezvous; it is
// reply.Tensors[0], valid until reply.Release.
func (c *WorkerClient) RecvTensor(ctx context.Context, step int64, key string, reply *rpc.Reply) (*tfpb.RecvTensorResponse, error) {
	meta := appendRecvTensorRequest(nil, step, key)
	if err := c.gen.RecvTensor(ctx, &rpc.Request{Meta: meta}, reply); err != nil {
		return nil, err
	}
	resp := new(tfpb.RecvTensorResponse)
	if err := proto.Unmarshal(reply.Meta, resp); err != nil {
		return nil, fmt.Errorf("handlers: RecvTensor: decode response: %w", err)
	}
	if len(reply.Tensors) != 1 {
		return nil, fmt.Errorf("handlers: RecvTensor: %d tensors in the response", len(reply.Tensors))
	}
	return resp, nil
}

// FuseRecvTensor fetches the tensors of many keys of one step in one call;
// they are reply.Tensors, in the order of keys, valid until reply.Release.
func (c *WorkerClient) FuseRecvTensor(ctx context.Context, step int64, keys []string, reply *rpc.Reply) ([]*tfpb.RecvTensorResponse, error) {
	var meta, scratch []byte
	for _, k := range keys {
		scratch = appendRecvTensorRequest(scratch[:0], step, k)
		meta = protowire.AppendBytes(meta, scratch)
	}
	if err := c.c.Call(ctx, MethodFuseRecvTensor, &rpc.Request{Meta: meta}, reply); err != nil {
		return nil, err
	}
	resps := make([]*tfpb.RecvTensorResponse, 0, len(keys))
	for b := reply.Meta; len(b) > 0; {
		m, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("handlers: FuseRecvTensor: decode response %d: %w", len(resps), protowire.ParseError(n))
		}
		b = b[n:]
		resp := new(tfpb.RecvTensorResponse)
		if err := proto.Unmarshal(m, resp); err != nil {
			return nil, fmt.Errorf("handlers: FuseRecvTensor: decode response %d: %w", len(resps), err)
		}
		resps = append(resps, resp)
	}
	if len(resps) != len(keys) || len(reply.Tensors) != len(keys) {
		return nil, fmt.Errorf("handlers: FuseRecvTensor: %d responses and %d tensors for %d keys", len(resps), len(reply.Tensors), len(keys))
	}
	return resps, nil
}
