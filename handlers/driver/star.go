package driver

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// StarCaller calls a task's WorkerService over starwire. RunGraph and
// RecvTensor carry their tensors as raw segments after the protobuf
// metadata, as package handlers expects; the other methods are protobuf
// only.
type StarCaller struct {
	task string
	c    *rpc.Client
	n    counter
}

// NewStarCaller returns a Caller for task over client, which it owns.
func NewStarCaller(task string, client *rpc.Client) *StarCaller {
	return &StarCaller{task: task, c: client}
}

// Task implements Caller.
func (s *StarCaller) Task() string { return s.task }

// Client returns the starwire client the caller uses.
func (s *StarCaller) Client() *rpc.Client { return s.c }

// Stats implements Caller.
func (s *StarCaller) Stats() Stats { return s.n.stats() }

// Close implements Caller.
func (s *StarCaller) Close() error { return s.c.Close() }

// callProto makes a call without tensors.
func (s *StarCaller) callProto(ctx context.Context, m rpc.Method, req, resp proto.Message) error {
	if err := s.c.CallProto(ctx, m, req, resp); err != nil {
		return err
	}
	s.n.add(proto.Size(req) + proto.Size(resp))
	return nil
}

// GetStatus implements Caller.
func (s *StarCaller) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	resp := new(tfpb.GetStatusResponse)
	return resp, s.callProto(ctx, handlers.MethodGetStatus, &tfpb.GetStatusRequest{}, resp)
}

// CreateWorkerSession implements Caller.
func (s *StarCaller) CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) error {
	return s.callProto(ctx, handlers.MethodCreateWorkerSession, req, new(tfpb.CreateWorkerSessionResponse))
}

// DeleteWorkerSession implements Caller.
func (s *StarCaller) DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) error {
	return s.callProto(ctx, handlers.MethodDeleteWorkerSession, req, new(tfpb.DeleteWorkerSessionResponse))
}

// RegisterGraph implements Caller.
func (s *StarCaller) RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	resp := new(tfpb.RegisterGraphResponse)
	return resp, s.callProto(ctx, handlers.MethodRegisterGraph, req, resp)
}

// DeregisterGraph implements Caller.
func (s *StarCaller) DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) error {
	return s.callProto(ctx, handlers.MethodDeregisterGraph, req, new(tfpb.DeregisterGraphResponse))
}

// CleanupGraph implements Caller.
func (s *StarCaller) CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error {
	return s.callProto(ctx, handlers.MethodCleanupGraph, req, new(tfpb.CleanupGraphResponse))
}

// RunGraph implements Caller: the request's send entries name the feeds,
// whose tensors follow as segments; the response's recv entries name the
// fetched segments. The entries are appended to req's encoding, req
// itself left as it is.
func (s *StarCaller) RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []Feed, out *Fetched) error {
	out.Release()
	if len(req.GetSend()) > 0 {
		return status.Errorf(wire.InvalidArgument, "driver: RunGraph on %s: the request has send entries; pass them as feeds", s.task)
	}
	tensors := make([]wire.Tensor, len(feeds))
	sent := 0
	for i := range feeds {
		tensors[i] = feeds[i].Tensor
		tensors[i].Buf = nil // the feed's owner keeps its reference
		sent += tensors[i].ByteLen()
	}
	// One buffer for the request and the send entries after it.
	meta := make([]byte, 0, proto.Size(req)+sendsSize(feeds))
	meta, err := proto.MarshalOptions{}.MarshalAppend(meta, req)
	if err != nil {
		return fmt.Errorf("driver: RunGraph on %s: marshal: %w", s.task, err)
	}
	meta = appendSends(meta, feeds)
	reply := new(rpc.Reply)
	if err := s.c.Call(ctx, handlers.MethodRunGraph, &rpc.Request{Meta: meta, Tensors: tensors}, reply); err != nil {
		return err
	}
	var resp tfpb.RunGraphResponse
	if err := proto.Unmarshal(reply.Meta, &resp); err != nil {
		reply.Release()
		return fmt.Errorf("driver: RunGraph on %s: unmarshal response: %w", s.task, err)
	}
	if err := statusInBody(&resp); err != nil {
		reply.Release()
		return fmt.Errorf("driver: RunGraph on %s: %w", s.task, err)
	}
	if len(resp.Recv) != len(reply.Tensors) {
		reply.Release()
		return fmt.Errorf("driver: RunGraph on %s: %d recv entries for %d tensors", s.task, len(resp.Recv), len(reply.Tensors))
	}
	got := len(reply.Meta)
	for i, r := range resp.Recv {
		out.Keys = append(out.Keys, r.GetName())
		out.Tensors = append(out.Tensors, reply.Tensors[i])
		got += reply.Tensors[i].ByteLen()
	}
	out.release = reply.Release
	s.n.add(len(meta) + sent + got)
	return nil
}

// RecvTensor implements Caller: the response's tensor carries dtype and
// shape only, and its bytes follow as the one segment.
func (s *StarCaller) RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest, out *Fetched) error {
	out.Release()
	meta, err := proto.MarshalOptions{}.Marshal(req)
	if err != nil {
		return fmt.Errorf("driver: RecvTensor on %s: marshal: %w", s.task, err)
	}
	reply := new(rpc.Reply)
	if err := s.c.Call(ctx, handlers.MethodRecvTensor, &rpc.Request{Meta: meta}, reply); err != nil {
		return err
	}
	if len(reply.Tensors) != 1 {
		reply.Release()
		return fmt.Errorf("driver: RecvTensor on %s: %d tensors in the response, want 1", s.task, len(reply.Tensors))
	}
	out.Keys = append(out.Keys, req.GetRendezvousKey())
	out.Tensors = append(out.Tensors, reply.Tensors[0])
	out.release = reply.Release
	s.n.add(len(meta) + len(reply.Meta) + reply.Tensors[0].ByteLen())
	return nil
}

// statusInBody returns the error a RunGraphResponse carries in its body
// (store_errors_in_response_body), if any.
func statusInBody(resp *tfpb.RunGraphResponse) error {
	if c := resp.GetStatusCode(); c != 0 {
		return status.Errorf(wire.Code(c), "%s", resp.GetStatusErrorMessage())
	}
	return nil
}

// The field numbers of RunGraphRequest.send and NamedTensorProto.name.
var (
	runGraphSendField  = (&tfpb.RunGraphRequest{}).ProtoReflect().Descriptor().Fields().ByName("send").Number()
	namedTensorNameFld = (&tfpb.NamedTensorProto{}).ProtoReflect().Descriptor().Fields().ByName("name").Number()
)

// sendsSize is the encoded size of appendSends's entries for feeds.
func sendsSize(feeds []Feed) int {
	n := 0
	for i := range feeds {
		n += protowire.SizeTag(runGraphSendField) + protowire.SizeBytes(protowire.SizeTag(namedTensorNameFld)+protowire.SizeBytes(len(feeds[i].Key)))
	}
	return n
}

// appendSends appends to b, an encoded RunGraphRequest, a send entry per
// feed naming its key, as req.Send's entries would encode: a message's
// fields may come in any order, and repeated ones accumulate.
func appendSends(b []byte, feeds []Feed) []byte {
	for i := range feeds {
		key := feeds[i].Key
		b = protowire.AppendTag(b, runGraphSendField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(protowire.SizeTag(namedTensorNameFld)+protowire.SizeBytes(len(key))))
		b = protowire.AppendTag(b, namedTensorNameFld, protowire.BytesType)
		b = protowire.AppendString(b, key)
	}
	return b
}
