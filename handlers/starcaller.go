package handlers

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// StarCaller calls a task's WorkerService over starwire, in the encoding of
// the package doc: RunGraph, RecvTensor and FuseRecvTensor carry their
// tensors as raw segments after the protobuf metadata; the other methods
// are protobuf only. No method changes the request it is given. It counts
// every call it makes, Call's included. Safe for concurrent use.
type StarCaller struct {
	task string
	c    *rpc.Client
	n    counter
}

// NewStarCaller returns a client of task over client, which it owns.
func NewStarCaller(task string, client *rpc.Client) *StarCaller {
	return &StarCaller{task: task, c: client}
}

// Task returns the name of the task called, "/job:ps/replica:0/task:0".
func (s *StarCaller) Task() string { return s.task }

// Client returns the starwire client the caller uses.
func (s *StarCaller) Client() *rpc.Client { return s.c }

// Stats returns the calls made so far and the bytes they moved.
func (s *StarCaller) Stats() Stats { return s.n.stats() }

// Close closes the starwire client.
func (s *StarCaller) Close() error { return s.c.Close() }

// Call implements Caller: it makes any starwire call and counts it.
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

// callProto makes a call without tensors.
func (s *StarCaller) callProto(ctx context.Context, m rpc.Method, req, resp proto.Message) error {
	if err := s.c.CallProto(ctx, m, req, resp); err != nil {
		return err
	}
	s.n.add(proto.Size(req) + proto.Size(resp))
	return nil
}

// GetStatus calls GetStatus.
func (s *StarCaller) GetStatus(ctx context.Context) (*tfpb.GetStatusResponse, error) {
	resp := new(tfpb.GetStatusResponse)
	return resp, s.callProto(ctx, MethodGetStatus, &tfpb.GetStatusRequest{}, resp)
}

// CreateWorkerSession calls CreateWorkerSession.
func (s *StarCaller) CreateWorkerSession(ctx context.Context, req *tfpb.CreateWorkerSessionRequest) error {
	return s.callProto(ctx, MethodCreateWorkerSession, req, new(tfpb.CreateWorkerSessionResponse))
}

// DeleteWorkerSession calls DeleteWorkerSession.
func (s *StarCaller) DeleteWorkerSession(ctx context.Context, req *tfpb.DeleteWorkerSessionRequest) error {
	return s.callProto(ctx, MethodDeleteWorkerSession, req, new(tfpb.DeleteWorkerSessionResponse))
}

// RegisterGraph calls RegisterGraph.
func (s *StarCaller) RegisterGraph(ctx context.Context, req *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	resp := new(tfpb.RegisterGraphResponse)
	return resp, s.callProto(ctx, MethodRegisterGraph, req, resp)
}

// DeregisterGraph calls DeregisterGraph.
func (s *StarCaller) DeregisterGraph(ctx context.Context, req *tfpb.DeregisterGraphRequest) error {
	return s.callProto(ctx, MethodDeregisterGraph, req, new(tfpb.DeregisterGraphResponse))
}

// CleanupGraph calls CleanupGraph.
func (s *StarCaller) CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error {
	return s.callProto(ctx, MethodCleanupGraph, req, new(tfpb.CleanupGraphResponse))
}

// RunGraph runs req with feeds as its send entries (req.Send must be
// empty) and places the tensors fetched for req.RecvKey in out, in that
// order, named by the response's recv entries. The send entries are
// appended to req's encoding, req itself left as it is; the feeds'
// tensors follow as segments, and so do the fetched ones. An error the
// response carries in its body (store_errors_in_response_body) is
// returned as the call's.
func (s *StarCaller) RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []Feed, out *Fetched) error {
	out.Release()
	if len(req.GetSend()) > 0 {
		return status.Errorf(wire.InvalidArgument, "handlers: RunGraph on %s: the request has send entries; pass them as feeds", s.task)
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
		return fmt.Errorf("handlers: RunGraph on %s: marshal: %w", s.task, err)
	}
	meta = appendSends(meta, feeds)
	reply := new(rpc.Reply)
	if err := s.c.Call(ctx, MethodRunGraph, &rpc.Request{Meta: meta, Tensors: tensors}, reply); err != nil {
		return err
	}
	var resp tfpb.RunGraphResponse
	if err := proto.Unmarshal(reply.Meta, &resp); err != nil {
		reply.Release()
		return fmt.Errorf("handlers: RunGraph on %s: unmarshal response: %w", s.task, err)
	}
	if err := statusInBody(&resp); err != nil {
		reply.Release()
		return fmt.Errorf("handlers: RunGraph on %s: %w", s.task, err)
	}
	if len(resp.Recv) != len(reply.Tensors) {
		reply.Release()
		return fmt.Errorf("handlers: RunGraph on %s: %d recv entries for %d tensors", s.task, len(resp.Recv), len(reply.Tensors))
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

// RecvTensor fetches req's rendezvous key of req's step into out. Only
// the step and the key are sent, which is all a starwire task reads.
func (s *StarCaller) RecvTensor(ctx context.Context, req *tfpb.RecvTensorRequest, out *Fetched) error {
	return s.recv(ctx, MethodRecvTensor, req.GetStepId(), []string{req.GetRendezvousKey()}, out)
}

// FuseRecvTensor fetches the tensors of many rendezvous keys of one step
// into out, in the order of keys, in one call; each key waits up to the
// call's deadline, and one failure fails the call.
func (s *StarCaller) FuseRecvTensor(ctx context.Context, step int64, keys []string, out *Fetched) error {
	return s.recv(ctx, MethodFuseRecvTensor, step, keys, out)
}

// recv makes a RecvTensor call (one key) or a FuseRecvTensor call (any
// number) and places the answered tensors in out.
func (s *StarCaller) recv(ctx context.Context, m rpc.Method, step int64, keys []string, out *Fetched) error {
	out.Release()
	var meta []byte
	if m.ID == MethodRecvTensor.ID {
		meta = appendRecvTensorRequest(nil, step, keys[0])
	} else {
		var scratch []byte
		for _, k := range keys {
			scratch = appendRecvTensorRequest(scratch[:0], step, k)
			meta = appendFused(meta, scratch)
		}
	}
	reply := new(rpc.Reply)
	if err := s.Call(ctx, m, &rpc.Request{Meta: meta}, reply); err != nil {
		return err
	}
	if len(reply.Tensors) != len(keys) {
		reply.Release()
		return fmt.Errorf("handlers: %s on %s: %d tensors in the response for %d keys", m.Name, s.task, len(reply.Tensors), len(keys))
	}
	if err := markDead(m, reply); err != nil {
		reply.Release()
		return fmt.Errorf("handlers: %s on %s: %w", m.Name, s.task, err)
	}
	out.Keys = append(out.Keys, keys...)
	out.Tensors = append(out.Tensors, reply.Tensors...)
	out.release = reply.Release
	return nil
}

// markDead decodes the RecvTensorResponse of each of reply's tensors (one
// for RecvTensor, a sequence for FuseRecvTensor) and marks the dead ones.
func markDead(m rpc.Method, reply *rpc.Reply) error {
	b := reply.Meta
	for i := range reply.Tensors {
		msg := b
		if m.ID != MethodRecvTensor.ID {
			var err error
			if msg, b, err = nextFused(b); err != nil {
				return status.Errorf(wire.DataLoss, "decode response %d: %v", i, err)
			}
		}
		resp, err := parseRecvTensorResponse(msg)
		if err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		reply.Tensors[i].Dead = reply.Tensors[i].Dead || resp.isDead
	}
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
