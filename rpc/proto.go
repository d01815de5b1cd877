package rpc

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire"
)

// metaBufs recycles the buffers protobuf metadata is marshalled into.
var metaBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// replies recycles CallProto's replies, which the call table refers to and
// which would otherwise escape to the heap on every call.
var replies = sync.Pool{New: func() any { return new(Reply) }}

// CallProto calls m with req marshalled as the metadata and unmarshals the
// answer's metadata into resp. It is for methods without tensors.
func (c *Client) CallProto(ctx context.Context, m Method, req, resp proto.Message) error {
	bp := metaBufs.Get().(*[]byte)
	defer metaBufs.Put(bp)
	meta, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], req)
	if err != nil {
		return c.fail(m, Errorf(wire.InvalidArgument, "marshal %T: %v", req, err))
	}
	*bp = meta
	reply := replies.Get().(*Reply)
	defer func() { reply.Release(); replies.Put(reply) }()
	if err := c.Call(ctx, m, &Request{Meta: meta}, reply); err != nil {
		return err
	}
	if err := proto.Unmarshal(reply.Meta, resp); err != nil {
		return c.fail(m, Errorf(wire.DataLoss, "unmarshal %T: %v", resp, err))
	}
	return nil
}

// HandleProto adapts a function of protobuf messages to a Handler: the
// request's metadata is unmarshalled into a new Req, and the returned
// message is marshalled as the response's metadata.
func HandleProto[Req, Resp any, PReq interface {
	*Req
	proto.Message
}, PResp interface {
	*Resp
	proto.Message
}](f func(context.Context, PReq) (PResp, error)) Handler {
	return func(ctx context.Context, in *wire.Inbound, resp *Response) error {
		req := PReq(new(Req))
		if err := proto.Unmarshal(in.Meta, req); err != nil {
			return Errorf(wire.InvalidArgument, "unmarshal %T: %v", req, err)
		}
		out, err := f(ctx, req)
		if err != nil {
			return err
		}
		if resp.Meta, err = (proto.MarshalOptions{}).MarshalAppend(resp.Meta, out); err != nil {
			return Errorf(wire.Internal, "marshal %T: %v", out, err)
		}
		return nil
	}
}
