package handlers

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// runGraph runs one step of a registered graph. feeds[i] is the tensor of
// req.Send[i]; runGraph does not take the callers' references. The
// returned tensors, one per req.RecvKey, each own a reference.
func (w *Worker) runGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	resp, fetches, err := w.runGraphErr(ctx, req, feeds)
	if err != nil && req.GetStoreErrorsInResponseBody() {
		return &tfpb.RunGraphResponse{StatusCode: tfpb.Code(rpc.CodeOf(err)), StatusErrorMessage: err.Error()}, nil, nil
	}
	return resp, fetches, err
}

func (w *Worker) runGraphErr(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	if err := w.checkSession(req.GetSessionHandle(), req.GetCreateWorkerSessionCalled()); err != nil {
		return nil, nil, err
	}
	if req.GetIsPartial() {
		return nil, nil, rpc.Errorf(wire.Unimplemented, "RunGraph: partial runs are not supported")
	}
	g, err := w.lookupGraph(req.GetGraphHandle())
	if err != nil {
		return nil, nil, err
	}
	timeline := req.GetExecOpts().GetRecordTimeline() || req.GetExecOpts().GetRecordCosts()
	recording := timeline || w.stats.recording()
	fetches, nodeStats, err := g.Run(ctx, req, feeds, recording)
	if err != nil {
		return nil, nil, err
	}
	resp := &tfpb.RunGraphResponse{Recv: make([]*tfpb.NamedTensorProto, len(req.GetRecvKey()))}
	for i, k := range req.GetRecvKey() {
		resp.Recv[i] = &tfpb.NamedTensorProto{Name: k}
	}
	if recording {
		st := &tfpb.StepStats{DevStats: []*tfpb.DeviceStepStats{{Device: w.attrs.Name, NodeStats: nodeStats}}}
		w.stats.record(req.GetStepId(), st)
		if timeline {
			resp.StepStats = st
		}
	}
	return resp, fetches, nil
}

// decodeSends decodes the tensors a RunGraph request carries in its
// protobuf, as gRPC callers send them. On error it releases those it
// decoded.
func decodeSends(req *tfpb.RunGraphRequest) ([]wire.Tensor, error) {
	feeds := make([]wire.Tensor, len(req.GetSend()))
	for i, s := range req.GetSend() {
		t, err := tensor.FromProto(s.GetTensor())
		if err != nil {
			tensor.ReleaseAll(feeds[:i])
			return nil, rpc.Errorf(wire.InvalidArgument, "RunGraph: send %q: %v", s.GetName(), err)
		}
		feeds[i] = t
	}
	return feeds, nil
}

// handleRunGraph serves RunGraph over starwire: the sends' tensors are the
// request's segments and the fetched tensors the response's, in order.
func (w *Worker) handleRunGraph(ctx context.Context, in *wire.Inbound, resp *rpc.Response) error {
	req := new(tfpb.RunGraphRequest)
	if err := proto.Unmarshal(in.Meta, req); err != nil {
		return rpc.Errorf(wire.InvalidArgument, "RunGraph: decode request: %v", err)
	}
	feeds := in.Tensors
	if len(feeds) == 0 && len(req.GetSend()) > 0 {
		// A caller may put the tensors in the protobuf instead.
		decoded, err := decodeSends(req)
		if err != nil {
			return err
		}
		defer tensor.ReleaseAll(decoded)
		feeds = decoded
	}
	out, fetches, err := w.runGraph(ctx, req, feeds)
	if err != nil {
		return err
	}
	for i := range fetches {
		resp.Tensors = append(resp.Tensors, onWire(fetches[i]))
	}
	var merr error
	resp.Meta, merr = proto.MarshalOptions{}.MarshalAppend(resp.Meta, out)
	if merr != nil {
		return rpc.Errorf(wire.Internal, "RunGraph: encode response: %v", merr)
	}
	return nil
}
