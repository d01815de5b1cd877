package rpc

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire"
)

// CallProtoTensors calls m with req marshalled as the metadata and tensors
// as raw segments beside it, and unmarshals the answer's metadata into
// resp; the answer's tensors are reply.Tensors, valid until reply.Release.
// The tensors' memory must stay unchanged until the call returns.
func (c *Client) CallProtoTensors(ctx context.Context, m Method, req proto.Message, tensors []wire.Tensor, resp proto.Message, reply *Reply) error {
	bp := getMetaBuf()
	defer putMetaBuf(bp)
	meta, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], req)
	if err != nil {
		return c.fail(m, Errorf(wire.InvalidArgument, "marshal %T: %v", req, err))
	}
	*bp = meta
	pc := getProtoCall(meta, tensors)
	defer pc.put()
	if err := c.Call(ctx, m, &pc.req, reply); err != nil {
		return err
	}
	if err := proto.Unmarshal(reply.Meta, resp); err != nil {
		reply.Release()
		return c.fail(m, Errorf(wire.DataLoss, "unmarshal %T: %v", resp, err))
	}
	return nil
}

// HandleProtoTensors adapts a function of protobuf messages and raw tensor
// segments to a Handler: f gets the request's metadata unmarshalled into a
// new Req, and the frame itself, whose Tensors are the request's segments
// (valid until the answer is sent); it may append tensors to out.Tensors,
// and its returned message is marshalled as the answer's metadata.
func HandleProtoTensors[Req, Resp any, PReq interface {
	*Req
	proto.Message
}, PResp interface {
	*Resp
	proto.Message
}](f func(ctx context.Context, req PReq, in *wire.Inbound, out *Response) (PResp, error)) Handler {
	return func(ctx context.Context, in *wire.Inbound, out *Response) error {
		req := PReq(new(Req))
		if err := proto.Unmarshal(in.Meta, req); err != nil {
			return Errorf(wire.InvalidArgument, "unmarshal %T: %v", req, err)
		}
		resp, err := f(ctx, req, in, out)
		if err != nil {
			return err
		}
		if out.Meta, err = (proto.MarshalOptions{}).MarshalAppend(out.Meta, resp); err != nil {
			return Errorf(wire.Internal, "marshal %T: %v", resp, err)
		}
		return nil
	}
}
