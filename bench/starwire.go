package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// The starwire contender's methods.
var (
	// MethodEcho answers with a copy of the request's metadata.
	MethodEcho = rpc.NewMethod("bench.Echo")
	// MethodFetch answers a uvarint byte count in the metadata with a
	// DT_UINT8 tensor of that many bytes, sent from a buffer the server
	// holds, as RecvTensor answers with a tensor that is ready.
	MethodFetch = rpc.NewMethod("bench.Fetch")
	// MethodFuse answers a uvarint key count and a uvarint byte count with
	// that many DT_UINT8 tensors of that size, as FuseRecvTensor answers
	// many rendezvous keys in one call.
	MethodFuse = rpc.NewMethod("bench.Fuse")
	// MethodControl is a control call: a RecvTensorRequest in, a
	// RecvTensorResponse out, no tensors.
	MethodControl = rpc.NewMethod("bench.Control")
)

// StarwireServer serves the starwire contender.
type StarwireServer struct {
	*rpc.Server

	mu     sync.Mutex
	tensor *wire.Buffer    // fetches are answered from it; grown on demand
	shapes map[int][]int64 // read-only once handed out
}

// NewStarwireServer returns a server with the bench methods registered. All
// of them are quick and run inline on the connection's receiving goroutine.
func NewStarwireServer() *StarwireServer {
	s := &StarwireServer{Server: rpc.NewServer()}
	// The clients of a sweep all connect from loopback: a fan-in point's
	// peers are many connections from one address.
	s.MaxConnsPerHost = rpc.DefaultMaxConns
	inline := rpc.HandlerOptions{Inline: true}
	s.Register(MethodEcho, echoHandler, inline)
	s.Register(MethodFetch, s.fetch, inline)
	s.Register(MethodFuse, s.fuse, inline)
	s.Register(MethodControl, rpc.HandleProto(control), inline)
	return s
}

// echoHandler copies the request into the response: an echo must not send
// back its receive buffer, which a real handler could not do either.
func echoHandler(_ context.Context, req *wire.Inbound, resp *rpc.Response) error {
	resp.Meta = append(resp.Meta, req.Meta...)
	return nil
}

func (s *StarwireServer) fetch(_ context.Context, req *wire.Inbound, resp *rpc.Response) error {
	n, k := binary.Uvarint(req.Meta)
	if k <= 0 || n > MaxRawFetch {
		return rpc.Errorf(wire.InvalidArgument, "bench: fetch of %x", req.Meta)
	}
	buf, shape := s.held(int(n))
	// Zero-copy: the response points at the held buffer; the server drops
	// this reference once the bytes are written.
	resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: shape, Data: buf.Bytes()[:n], Buf: buf})
	return nil
}

// FuseKeys is how many tensors a fused fetch of the sweep asks for.
const FuseKeys = 8

func (s *StarwireServer) fuse(_ context.Context, req *wire.Inbound, resp *rpc.Response) error {
	k, i := binary.Uvarint(req.Meta)
	n, j := binary.Uvarint(req.Meta[max(i, 0):])
	if i <= 0 || j <= 0 || k > 1024 || n*k > MaxRawFetch {
		return rpc.Errorf(wire.InvalidArgument, "bench: fuse of %x", req.Meta)
	}
	for range k {
		buf, shape := s.held(int(n))
		resp.Tensors = append(resp.Tensors, wire.Tensor{DType: wire.DTUint8, Shape: shape, Data: buf.Bytes()[:n], Buf: buf})
	}
	return nil
}

// held returns a reference to the held buffer, at least n bytes long, and
// the shape of a tensor of its first n bytes. Shapes are kept per size, as a
// real server keeps each tensor's shape with it, so answering allocates
// nothing.
func (s *StarwireServer) held(n int) (*wire.Buffer, []int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tensor == nil || s.tensor.Len() < n {
		if s.tensor != nil {
			s.tensor.Release()
		}
		s.tensor = wire.NewBuffer(n)
		FillPattern(s.tensor.Bytes())
	}
	shape, ok := s.shapes[n]
	if !ok {
		if s.shapes == nil {
			s.shapes = make(map[int][]int64)
		}
		shape = []int64{int64(n)}
		s.shapes[n] = shape
	}
	return s.tensor.Ref(), shape
}

// Close shuts the server down and drops the held tensor.
func (s *StarwireServer) Close() error {
	err := s.Server.Close()
	s.mu.Lock()
	s.tensor.Release()
	s.tensor = nil
	s.mu.Unlock()
	return err
}

// control is a RecvTensor-shaped control call answered from metadata only.
func control(_ context.Context, req *tfpb.RecvTensorRequest) (*tfpb.RecvTensorResponse, error) {
	return &tfpb.RecvTensorResponse{SendStartMicros: req.StepId, RequireAck: req.DmaOk}, nil
}

// StarwireClient makes the bench's calls on one rpc.Client. A
// StarwireClient is used by one goroutine; several may share an rpc.Client.
type StarwireClient struct {
	c     *rpc.Client
	req   rpc.Request
	reply rpc.Reply
	meta  []byte
	dst   []byte // where Fetch lands the tensor, when set
}

// NewStarwireClient returns a caller on c.
func NewStarwireClient(c *rpc.Client) *StarwireClient {
	return &StarwireClient{c: c}
}

// Echo sends req as metadata and copies the answer into resp, which must
// have len(req) bytes.
func (s *StarwireClient) Echo(ctx context.Context, req, resp []byte) error {
	s.req.Meta = req
	err := s.c.Call(ctx, MethodEcho, &s.req, &s.reply)
	s.req.Meta = nil
	if err != nil {
		return err
	}
	if len(s.reply.Meta) != len(resp) {
		s.reply.Release()
		return fmt.Errorf("bench: starwire echo of %d bytes, want %d", len(s.reply.Meta), len(resp))
	}
	copy(resp, s.reply.Meta)
	s.reply.Release()
	return nil
}

// FetchPooled asks for n bytes, which land in a pooled buffer, and returns
// them. They are valid until Release or the next call.
func (s *StarwireClient) FetchPooled(ctx context.Context, n int) ([]byte, error) {
	s.reply.Alloc = nil
	if err := s.fetch(ctx, n); err != nil {
		return nil, err
	}
	return s.reply.Tensors[0].Data, nil
}

// FetchInto asks for len(dst) bytes and lands them directly in dst.
func (s *StarwireClient) FetchInto(ctx context.Context, dst []byte) error {
	s.dst = dst
	if s.reply.Alloc == nil {
		s.reply.Alloc = s.allocDst
	}
	err := s.fetch(ctx, len(dst))
	s.reply.Release()
	s.dst = nil
	return err
}

func (s *StarwireClient) allocDst(in *wire.Inbound) error {
	if len(in.Tensors) != 1 || in.Tensors[0].ByteLen() != len(s.dst) {
		return fmt.Errorf("bench: fetch answered %d tensors, want one of %d bytes", len(in.Tensors), len(s.dst))
	}
	in.Tensors[0].Data = s.dst
	return nil
}

func (s *StarwireClient) fetch(ctx context.Context, n int) error {
	s.meta = binary.AppendUvarint(s.meta[:0], uint64(n))
	s.req.Meta = s.meta
	err := s.c.Call(ctx, MethodFetch, &s.req, &s.reply)
	s.req.Meta = nil
	if err != nil {
		return err
	}
	if len(s.reply.Tensors) != 1 || len(s.reply.Tensors[0].Data) != n {
		s.reply.Release()
		return fmt.Errorf("bench: starwire fetch of %d bytes answered with %d tensors", n, len(s.reply.Tensors))
	}
	return nil
}

// Fuse asks for k tensors of n bytes in one call; they land in pooled
// buffers, released before it returns.
func (s *StarwireClient) Fuse(ctx context.Context, k, n int) error {
	s.reply.Alloc = nil
	s.meta = binary.AppendUvarint(binary.AppendUvarint(s.meta[:0], uint64(k)), uint64(n))
	s.req.Meta = s.meta
	err := s.c.Call(ctx, MethodFuse, &s.req, &s.reply)
	s.req.Meta = nil
	if err != nil {
		return err
	}
	defer s.reply.Release()
	if len(s.reply.Tensors) != k {
		return fmt.Errorf("bench: starwire fuse of %d tensors answered with %d", k, len(s.reply.Tensors))
	}
	return nil
}

// Release returns the buffers of the last FetchPooled.
func (s *StarwireClient) Release() { s.reply.Release() }

// Control makes one control call through the rpc proto helpers.
func (s *StarwireClient) Control(ctx context.Context, req *tfpb.RecvTensorRequest, resp *tfpb.RecvTensorResponse) error {
	return s.c.CallProto(ctx, MethodControl, req, resp)
}
