package rpc

import (
	"context"
	"errors"

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

	call       *serverCall // the call answered, for Defer
	deferrable bool        // the handler runs where it may defer its answer
}

func (r *Response) reset() {
	for i := range r.Tensors {
		r.Tensors[i].Buf.Release()
		r.Tensors[i] = wire.Tensor{}
	}
	r.Meta, r.Tensors = r.Meta[:0], r.Tensors[:0]
}

// ErrDeferred is what a handler returns once it has deferred its answer
// with Response.Defer.
var ErrDeferred = errors.New("rpc: answer deferred")

// Defer lets a Deferrable method's handler return before it has its
// answer, instead of waiting for it: the handler arranges for answer to be
// called exactly once, from any goroutine, once it has filled the Response
// (or with the error to send instead), and returns ErrDeferred. The
// request, the Response and the handler's context stay the call's until
// answer is called, and no longer: the context ends when the caller gives
// up, and the handler must then answer promptly. answer may be called
// before the handler returns; the handler then touches none of them. A
// handler that has deferred must not panic.
//
// ok is false where the handler cannot defer (the method is not
// Deferrable, or runs behind interceptors): it then answers as any handler
// does, waiting on the goroutine it runs on.
func (r *Response) Defer() (answer func(error), ok bool) {
	if !r.deferrable || r.call == nil {
		return nil, false
	}
	r.deferrable = false
	if r.call.answerFn == nil {
		r.call.answerFn = r.call.finish
	}
	return r.call.answerFn, true
}

// HandlerOptions say how a method runs.
type HandlerOptions struct {
	// Inline handlers run on the connection's receiving goroutine and must
	// not block: no waiting on other calls, locks held long, or I/O. Their
	// responses are batched into one write per read. Others run on a
	// goroutine of their own.
	Inline bool
	// Deferrable handlers run inline as well, and may answer after they
	// return (see Response.Defer), as a handler that waits for another
	// party's event does: the event's own goroutine answers, where an
	// ordinary handler would hold a goroutine of its own until then and be
	// woken by it. Behind the server's interceptors they run as ordinary
	// handlers, on a goroutine of their own, and cannot defer.
	Deferrable bool
}

type method struct {
	Method
	h     Handler
	opts  HandlerOptions
	chain ServerHandler // h inside the server's interceptors; nil without
}
