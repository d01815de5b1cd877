package rpc

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/wire"
)

// metaBufs recycles the buffers protobuf metadata is marshalled into.
// valyala/bytebufferpool, which the design names for this, measured no
// better (bench's BenchmarkMetaPool), so it stays.
var metaBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledMeta is the largest metadata buffer kept for reuse, so that a
// rare large message (a graph) is not handed out for every later small one.
const maxPooledMeta = 64 << 10

func getMetaBuf() *[]byte { return metaBufs.Get().(*[]byte) }

func putMetaBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledMeta {
		metaBufs.Put(bp)
	}
}

// protoCall is a call's Request and Reply, which the call table refers to
// and which would otherwise escape to the heap on every call.
type protoCall struct {
	req   Request
	reply Reply
}

var protoCalls = sync.Pool{New: func() any { return new(protoCall) }}

func getProtoCall(meta []byte, tensors []wire.Tensor) *protoCall {
	pc := protoCalls.Get().(*protoCall)
	pc.req = Request{Meta: meta, Tensors: tensors}
	return pc
}

func (pc *protoCall) put() {
	pc.reply.Release()
	pc.req = Request{}
	protoCalls.Put(pc)
}

// CallProto calls m with req marshalled as the metadata and unmarshals the
// answer's metadata into resp. It is for methods without tensors.
func (c *Client) CallProto(ctx context.Context, m Method, req, resp proto.Message) error {
	bp := getMetaBuf()
	defer putMetaBuf(bp)
	meta, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], req)
	if err != nil {
		return c.fail(m, Errorf(wire.InvalidArgument, "marshal %T: %v", req, err))
	}
	*bp = meta
	pc := getProtoCall(meta, nil)
	defer pc.put()
	if err := c.Call(ctx, m, &pc.req, &pc.reply); err != nil {
		return err
	}
	if err := proto.Unmarshal(pc.reply.Meta, resp); err != nil {
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
