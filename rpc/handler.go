package rpc

import (
	"context"

	"github.com/starwire/starwire/wire"
)

// A Handler serves one method. req is the received frame: its metadata and
// tensors are valid until the handler's response has been sent, so a handler
// may answer with views of them; to keep a request tensor longer, Ref its Buf.
// The handler fills resp; a non-nil error is sent instead of resp, with the
// error's status code (see CodeOf).
//
// ctx carries the caller's deadline and is cancelled when the caller gives
// up. It belongs to the call and must not be used after the handler returns.
type Handler func(ctx context.Context, req *wire.Inbound, resp *Response) error

// A Response is what a handler answers with. Meta starts empty with reusable
// storage: append to it. Each tensor's Data must stay unchanged until the
// response is sent; a tensor's Buf, when set, is a reference the server
// releases after sending.
type Response struct {
	Meta    []byte
	Tensors []wire.Tensor
}

func (r *Response) reset() {
	for i := range r.Tensors {
		r.Tensors[i].Buf.Release()
		r.Tensors[i] = wire.Tensor{}
	}
	r.Meta, r.Tensors = r.Meta[:0], r.Tensors[:0]
}

// HandlerOptions say how a method runs.
type HandlerOptions struct {
	// Inline handlers run on the connection's receiving goroutine and must
	// not block: no waiting on other calls, locks held long, or I/O. Their
	// responses are batched into one write per read. Others run on a
	// goroutine of their own.
	Inline bool
}

type method struct {
	Method
	h     Handler
	opts  HandlerOptions
	chain ServerHandler // h inside the server's interceptors; nil without
}
