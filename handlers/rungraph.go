package handlers

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// runGraph runs one step of a registered graph. feeds[i] is the tensor of
// req.Send[i]; runGraph does not take the callers' references. The
// returned tensors, one per req.RecvKey, each own a reference.
// On failure, the error is in the response when the request asks for it
// (see runGraphFailed).
func (w *Worker) runGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	resp, fetches, err := w.runGraphErr(ctx, req, feeds)
	if err != nil {
		resp, err = runGraphFailed(req, err)
		return resp, nil, err
	}
	return resp, fetches, nil
}

// runGraphFailed is RunGraph's answer when it fails with err: a response
// holding the error's code and message when the request sets
// store_errors_in_response_body (a TensorFlow master sets it so that the
// call itself succeeds and the status survives proxies), else err. Every
// failure after the request is decoded goes through it: feeds that do not
// decode, the step, and fetches that do not encode.
func runGraphFailed(req *tfpb.RunGraphRequest, err error) (*tfpb.RunGraphResponse, error) {
	if !req.GetStoreErrorsInResponseBody() {
		return nil, err
	}
	// proto3 strings must be UTF-8, or the response would not encode.
	return &tfpb.RunGraphResponse{StatusCode: tfpb.Code(status.CodeOf(err)), StatusErrorMessage: strings.ToValidUTF8(statusMessage(err), "\uFFFD")}, nil
}

func (w *Worker) runGraphErr(ctx context.Context, req *tfpb.RunGraphRequest, feeds []wire.Tensor) (*tfpb.RunGraphResponse, []wire.Tensor, error) {
	if err := w.checkSession(req.GetSessionHandle(), req.GetCreateWorkerSessionCalled()); err != nil {
		return nil, nil, err
	}
	if req.GetIsPartial() {
		return nil, nil, status.Errorf(wire.Unimplemented, "RunGraph: partial runs are not supported")
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
			return nil, status.Errorf(wire.InvalidArgument, "RunGraph: send %q: %v", s.GetName(), err)
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
		return status.Errorf(wire.InvalidArgument, "RunGraph: decode request: %v", err)
	}
	feeds := in.Tensors
	var out *tfpb.RunGraphResponse
	var fetches []wire.Tensor
	var err error
	if len(feeds) == 0 && len(req.GetSend()) > 0 {
		// A caller may put the tensors in the protobuf instead.
		var decoded []wire.Tensor
		if decoded, err = decodeSends(req); err == nil {
			defer tensor.ReleaseAll(decoded)
			feeds = decoded
		}
	}
	if err == nil {
		out, fetches, err = w.runGraph(ctx, req, feeds)
	} else {
		out, err = runGraphFailed(req, err)
	}
	if err != nil {
		return err
	}
	meta, merr := proto.MarshalOptions{}.MarshalAppend(resp.Meta, out)
	if merr != nil {
		tensor.ReleaseAll(fetches)
		out, err = runGraphFailed(req, status.Errorf(wire.Internal, "RunGraph: encode response: %v", merr))
		if err != nil {
			return err
		}
		meta, _ = proto.MarshalOptions{}.MarshalAppend(resp.Meta, out) // a status alone always encodes
		fetches = nil
	}
	resp.Meta = meta
	for i := range fetches {
		resp.Tensors = append(resp.Tensors, onWire(fetches[i]))
	}
	return nil
}
