package stress

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
)

// The stress server's methods. Every request's metadata is a Args in its
// wire form (ArgsSize bytes).
var (
	// MethodEcho answers, from a goroutine of its own, with the request's
	// metadata and tensors, sent straight from the request's buffers.
	MethodEcho = rpc.NewMethod("stress.Echo")
	// MethodEchoInline is MethodEcho run inline on the connection's
	// receiving goroutine.
	MethodEchoInline = rpc.NewMethod("stress.EchoInline")
	// MethodGen answers with one DT_UINT8 tensor of Args.N bytes holding
	// the pattern of Args.Seed, in a buffer made for the call, as a handler
	// that computes its answer does: made with Response.NewBuffer, which
	// counts it against the connection's SendBudget before it is filled.
	MethodGen = rpc.NewMethod("stress.Gen")
	// MethodSleep holds the call for Args.N nanoseconds, or until the
	// caller gives up, then answers with the request's metadata.
	MethodSleep = rpc.NewMethod("stress.Sleep")
)

// MaxGen bounds what one Gen call may ask for.
const MaxGen = 256 << 20

// ArgsSize is the size of Args on the wire.
const ArgsSize = 16

// Args are a stress call's arguments, carried as its metadata.
type Args struct {
	Seed uint64 // the pattern of the call's data
	N    uint64 // Gen: bytes to answer with; Sleep: nanoseconds to wait
}

// Append appends a's wire form to dst.
func (a Args) Append(dst []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, a.Seed)
	return binary.LittleEndian.AppendUint64(dst, a.N)
}

// ErrArgs is returned for metadata that is not an Args.
var ErrArgs = errors.New("stress: malformed arguments")

// ParseArgs reads the Args at the start of meta.
func ParseArgs(meta []byte) (Args, error) {
	if len(meta) < ArgsSize {
		return Args{}, ErrArgs
	}
	return Args{Seed: binary.LittleEndian.Uint64(meta), N: binary.LittleEndian.Uint64(meta[8:])}, nil
}

// NewServer returns a server with the stress methods registered.
func NewServer() *rpc.Server {
	s := rpc.NewServer()
	Register(s)
	return s
}

// Register adds the stress methods to s.
func Register(s *rpc.Server) {
	s.Register(MethodEcho, echo, rpc.HandlerOptions{})
	s.Register(MethodEchoInline, echo, rpc.HandlerOptions{Inline: true})
	s.Register(MethodGen, gen, rpc.HandlerOptions{})
	s.Register(MethodSleep, sleep, rpc.HandlerOptions{})
	s.Register(MethodHeap, heap, rpc.HandlerOptions{Inline: true})
	s.Register(MethodLate, late, rpc.HandlerOptions{Inline: true})
}

// echo answers with views of the request, which stays valid until the
// answer is sent.
func echo(_ context.Context, req *wire.Inbound, resp *rpc.Response) error {
	resp.Meta = append(resp.Meta, req.Meta...)
	for _, t := range req.Tensors {
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: t.DType, Shape: t.Shape, Dead: t.Dead, Data: t.Data})
	}
	return nil
}

func gen(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
	a, err := ParseArgs(req.Meta)
	if err != nil || a.N > MaxGen {
		return rpc.Errorf(wire.InvalidArgument, "stress: gen of %x", req.Meta)
	}
	buf, err := resp.NewBuffer(ctx, int(a.N))
	if err != nil {
		return err
	}
	Fill(buf.Bytes(), a.Seed)
	resp.Meta = append(resp.Meta, req.Meta...)
	resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: []int64{int64(a.N)}, Data: buf.Bytes(), Buf: buf})
	return nil
}

func sleep(ctx context.Context, req *wire.Inbound, resp *rpc.Response) error {
	a, err := ParseArgs(req.Meta)
	if err != nil {
		return rpc.Errorf(wire.InvalidArgument, "stress: sleep of %x", req.Meta)
	}
	t := time.NewTimer(time.Duration(a.N))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	resp.Meta = append(resp.Meta, req.Meta...)
	return nil
}
