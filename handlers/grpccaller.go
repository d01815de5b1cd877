package handlers

import (
	"context"
	"fmt"
	"math"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// GRPCCaller calls a task's WorkerService over gRPC with the generated
// client; tensors travel in TensorProto.tensor_content, as in stock
// TensorFlow. Its methods are StarCaller's, Call included (for the
// methods a worker makes to its peers). No method changes the request it
// is given. Safe for concurrent use.
type GRPCCaller struct {
	task string
	cc   *grpc.ClientConn
	c    tfpb.WorkerServiceClient
	n    counter
}

// grpcCallOptions lift gRPC's 4 MiB default message limit: embedding rows
// and gradients of a large batch exceed it.
var grpcCallOptions = []grpc.CallOption{
	grpc.MaxCallRecvMsgSize(math.MaxInt32),
	grpc.MaxCallSendMsgSize(math.MaxInt32),
}

// DialGRPC returns a client of task at addr over gRPC. It connects lazily,
// in plaintext unless opts say otherwise (grpc.WithTransportCredentials):
// opts follow and override the defaults.
func DialGRPC(task, addr string, opts ...grpc.DialOption) (*GRPCCaller, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpcCallOptions...)}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("handlers: dial %s at %s over grpc: %w", task, addr, err)
	}
	return &GRPCCaller{task: task, cc: cc, c: tfpb.NewWorkerServiceClient(cc)}, nil
}

// Task returns the name of the task called.
func (g *GRPCCaller) Task() string { return g.task }

// Stats returns the calls made so far and the bytes they moved.
func (g *GRPCCaller) Stats() Stats { return g.n.stats() }

// Close closes the gRPC connection.
func (g *GRPCCaller) Close() error { return g.cc.Close() }

func (g *GRPCCaller) count(req, resp proto.Message) { g.n.add(proto.Size(req) + proto.Size(resp)) }

// wrap names the call and task in a gRPC error.
func (g *GRPCCaller) wrap(op string, err error) error {
	return fmt.Errorf("handlers: %s on %s: %w", op, g.task, fromGRPC(err))
}

// GetStatus calls GetStatus.
func (g *GRPCCaller) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	req := &tfpb.GetStatusRequest{}
	resp, err := g.c.GetStatus(ctx, req)
	if err != nil {
		return nil, g.wrap("GetStatus", err)
	}
	g.count(req, resp)
	return resp, nil
}

// CreateWorkerSession calls CreateWorkerSession.
func (g *GRPCCaller) CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) error {
	resp, err := g.c.CreateWorkerSession(ctx, req)
	if err != nil {
		return g.wrap("CreateWorkerSession", err)
	}
	g.count(req, resp)
	return nil
}

// DeleteWorkerSession calls DeleteWorkerSession.
func (g *GRPCCaller) DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) error {
	resp, err := g.c.DeleteWorkerSession(ctx, req)
	if err != nil {
		return g.wrap("DeleteWorkerSession", err)
	}
	g.count(req, resp)
	return nil
}

// RegisterGraph calls RegisterGraph.
func (g *GRPCCaller) RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	resp, err := g.c.RegisterGraph(ctx, req)
	if err != nil {
		return nil, g.wrap("RegisterGraph", err)
	}
	g.count(req, resp)
	return resp, nil
}

// DeregisterGraph calls DeregisterGraph.
func (g *GRPCCaller) DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) error {
	resp, err := g.c.DeregisterGraph(ctx, req)
	if err != nil {
		return g.wrap("DeregisterGraph", err)
	}
	g.count(req, resp)
	return nil
}

// CleanupGraph calls CleanupGraph.
func (g *GRPCCaller) CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error {
	resp, err := g.c.CleanupGraph(ctx, req)
	if err != nil {
		return g.wrap("CleanupGraph", err)
	}
	g.count(req, resp)
	return nil
}

// RunGraph is StarCaller.RunGraph over gRPC: feeds are copied into TensorProtos, and the
// fetched tensors point into the response's tensor_content.
func (g *GRPCCaller) RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []Feed, out *Fetched) error {
	out.Release()
	if len(req.GetSend()) > 0 {
		return status.Errorf(wire.InvalidArgument, "handlers: RunGraph on %s: the request has send entries; pass them as feeds", g.task)
	}
	if len(feeds) > 0 {
		// gRPC carries the feeds inside the request: a copy of it, so that
		// the caller's stays as it was.
		req = proto.CloneOf(req)
		for i := range feeds {
			tp, err := tensor.ToProto(&feeds[i].Tensor)
			if err != nil {
				return fmt.Errorf("handlers: RunGraph on %s: feed %q: %w", g.task, feeds[i].Key, err)
			}
			req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: feeds[i].Key, Tensor: tp})
		}
	}
	resp, err := g.c.RunGraph(ctx, req)
	if err != nil {
		return g.wrap("RunGraph", err)
	}
	g.count(req, resp)
	if err := statusInBody(resp); err != nil {
		return fmt.Errorf("handlers: RunGraph on %s: %w", g.task, err)
	}
	for _, r := range resp.Recv {
		t, err := tensorView(r.GetTensor())
		if err != nil {
			out.Release()
			return fmt.Errorf("handlers: RunGraph on %s: fetch %q: %w", g.task, r.GetName(), err)
		}
		out.Keys = append(out.Keys, r.GetName())
		out.Tensors = append(out.Tensors, t)
	}
	return nil
}

// RecvTensor calls RecvTensor.
func (g *GRPCCaller) RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest, out *Fetched) error {
	out.Release()
	resp, err := g.c.RecvTensor(ctx, req)
	if err != nil {
		return g.wrap("RecvTensor", err)
	}
	g.count(req, resp)
	t, err := tensorView(resp.GetTensor())
	if err != nil {
		return fmt.Errorf("handlers: RecvTensor on %s: %w", g.task, err)
	}
	t.Dead = resp.GetIsDead()
	out.Keys = append(out.Keys, req.GetRendezvousKey())
	out.Tensors = append(out.Tensors, t)
	return nil
}

// tensorView returns p as a tensor that points into p's tensor_content when
// it has one (no copy), or decodes p's typed values otherwise. Strings are
// always decoded: TensorFlow's encoding of them in tensor_content is not
// DTString's.
func tensorView(p *tfpb.TensorProto) (wire.Tensor, error) {
	if c := p.GetTensorContent(); len(c) > 0 && wire.DataType(p.GetDtype()) != wire.DTString {
		shape, err := tensor.ShapeFromProto(p.GetTensorShape())
		if err != nil {
			return wire.Tensor{}, err
		}
		t := wire.Tensor{DType: wire.DataType(p.GetDtype()), Shape: shape, Data: c}
		if err := t.Check(); err != nil {
			return wire.Tensor{}, err
		}
		return t, nil
	}
	t, err := tensor.FromProto(p)
	if err != nil {
		return wire.Tensor{}, err
	}
	// Copy out of the pooled buffer so the tensor needs no release.
	data := append([]byte(nil), t.Data...)
	t.Buf.Release()
	t.Data, t.Buf = data, nil
	return t, nil
}

// fromGRPC turns a gRPC status error into a *status.Status with the same
// code, so callers test errors the same way whatever the protocol.
// gRPC's codes are TensorFlow's.
func fromGRPC(err error) error {
	st, ok := grpcstatus.FromError(err)
	if !ok {
		return err
	}
	return &status.Status{Code: wire.Code(st.Code()), Msg: st.Message()}
}

// Call implements Caller for the methods a worker makes to its peers,
// RecvTensor and FuseRecvTensor, by making the gRPC RecvTensor call (one
// per key) and presenting the answer in starwire's encoding, with the
// codec every starwire task answers with: RecvTensorResponses without
// content, the bytes as resp.Tensors. The tensors point into the gRPC
// responses (no Buf), so resp.Alloc is not consulted. Other methods are
// Unimplemented.
func (g *GRPCCaller) Call(ctx context.Context, m rpc.Method, req *rpc.Request, resp *rpc.Reply) error {
	resp.Release()
	switch m.ID {
	case MethodRecvTensor.ID:
		r, err := parseRecvTensorRequest(req.Meta)
		if err != nil {
			return fmt.Errorf("RecvTensor over grpc: %w", err)
		}
		t, start, err := g.recvOne(ctx, r)
		if err != nil {
			return err
		}
		resp.Meta, resp.Tensors = appendRecvTensorResponse(nil, &t, start), []wire.Tensor{t}
		return nil
	case MethodFuseRecvTensor.ID:
		return g.fuseRecv(ctx, req.Meta, resp)
	}
	return status.Errorf(wire.Unimplemented, "%s is not carried over grpc between workers", m.Name)
}

// recvOne makes one gRPC RecvTensor for r and returns the answered tensor
// (with no data when dead, as it travels over starwire) and its
// send_start_micros.
func (g *GRPCCaller) recvOne(ctx context.Context, r recvTensorRequest) (wire.Tensor, int64, error) {
	req := &tfpb.RecvTensorRequest{StepId: r.step, RendezvousKey: string(r.key), RequestId: r.requestID}
	out, err := g.c.RecvTensor(ctx, req)
	if err != nil {
		return wire.Tensor{}, 0, g.wrap("RecvTensor", err)
	}
	g.count(req, out)
	t, err := tensorView(out.GetTensor())
	if err != nil {
		return wire.Tensor{}, 0, fmt.Errorf("handlers: RecvTensor on %s: %w", g.task, err)
	}
	t.Dead = out.GetIsDead()
	return onWire(t), out.GetSendStartMicros(), nil
}

// fuseRecv serves FuseRecvTensor with concurrent RecvTensor calls.
func (g *GRPCCaller) fuseRecv(ctx context.Context, meta []byte, resp *rpc.Reply) error {
	var reqs []recvTensorRequest
	for b := meta; len(b) > 0; {
		m, rest, err := nextFused(b)
		if err != nil {
			return status.Errorf(wire.InvalidArgument, "FuseRecvTensor over grpc: decode request %d: %v", len(reqs), err)
		}
		b = rest
		r, err := parseRecvTensorRequest(m)
		if err != nil {
			return fmt.Errorf("FuseRecvTensor over grpc: request %d: %w", len(reqs), err)
		}
		reqs = append(reqs, r)
	}
	starts := make([]int64, len(reqs))
	tensors := make([]wire.Tensor, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tensors[i], starts[i], errs[i] = g.recvOne(ctx, r)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	var out, scratch []byte
	for i := range tensors {
		scratch = appendRecvTensorResponse(scratch[:0], &tensors[i], starts[i])
		out = appendFused(out, scratch)
	}
	resp.Meta, resp.Tensors = out, tensors
	return nil
}
