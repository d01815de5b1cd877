package bench

import (
	"context"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/starwire/starwire/wire/tfpb"
)

// The gRPC contender: a unary service defined by hand on well-known wrapper
// messages, so that no generated code is needed. Options are gRPC-Go's
// defaults except the message size limits, raised so that 16 MiB tensors fit.
const (
	grpcServiceName = "starwire.bench.Bench"
	grpcEchoPath    = "/" + grpcServiceName + "/Echo"
	grpcFetchPath   = "/" + grpcServiceName + "/Fetch"
	grpcControlPath = "/" + grpcServiceName + "/Control"
	grpcMaxMsg      = MaxRawFetch + 1<<10
)

// grpcBench is the service's handler type, for the ServiceDesc's check.
type grpcBench interface {
	echo(context.Context, *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error)
	fetch(context.Context, *wrapperspb.UInt64Value) (*wrapperspb.BytesValue, error)
	control(context.Context, *tfpb.RecvTensorRequest) (*tfpb.RecvTensorResponse, error)
}

var grpcServiceDesc = grpc.ServiceDesc{
	ServiceName: grpcServiceName,
	HandlerType: (*grpcBench)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Echo", Handler: grpcEchoHandler},
		{MethodName: "Fetch", Handler: grpcFetchHandler},
		{MethodName: "Control", Handler: grpcControlHandler},
	},
	Streams: []grpc.StreamDesc{},
}

func grpcEchoHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	req := new(wrapperspb.BytesValue)
	if err := dec(req); err != nil {
		return nil, err
	}
	if icpt == nil {
		return srv.(grpcBench).echo(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: grpcEchoPath}
	return icpt(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return srv.(grpcBench).echo(ctx, req.(*wrapperspb.BytesValue))
	})
}

func grpcFetchHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	req := new(wrapperspb.UInt64Value)
	if err := dec(req); err != nil {
		return nil, err
	}
	if icpt == nil {
		return srv.(grpcBench).fetch(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: grpcFetchPath}
	return icpt(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return srv.(grpcBench).fetch(ctx, req.(*wrapperspb.UInt64Value))
	})
}

func grpcControlHandler(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
	req := new(tfpb.RecvTensorRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	if icpt == nil {
		return srv.(grpcBench).control(ctx, req)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: grpcControlPath}
	return icpt(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return srv.(grpcBench).control(ctx, req.(*tfpb.RecvTensorRequest))
	})
}

// GRPCServer serves the gRPC contender.
type GRPCServer struct {
	s *grpc.Server

	mu   sync.Mutex
	data []byte
}

// NewGRPCServer returns a gRPC server with the bench service registered.
func NewGRPCServer() *GRPCServer {
	g := &GRPCServer{s: grpc.NewServer(grpc.MaxRecvMsgSize(grpcMaxMsg), grpc.MaxSendMsgSize(grpcMaxMsg))}
	g.s.RegisterService(&grpcServiceDesc, g)
	return g
}

// Serve serves connections accepted on l until Close.
func (g *GRPCServer) Serve(l net.Listener) error { return g.s.Serve(l) }

// Close stops the server at once.
func (g *GRPCServer) Close() error {
	g.s.Stop()
	return nil
}

// echo answers with a copy of the request, like the other contenders.
func (g *GRPCServer) echo(_ context.Context, req *wrapperspb.BytesValue) (*wrapperspb.BytesValue, error) {
	return &wrapperspb.BytesValue{Value: append([]byte(nil), req.Value...)}, nil
}

// fetch answers with n bytes of a buffer it holds, as a RecvTensor answers
// with a tensor it already has.
func (g *GRPCServer) fetch(_ context.Context, req *wrapperspb.UInt64Value) (*wrapperspb.BytesValue, error) {
	if req.Value > MaxRawFetch {
		return nil, fmt.Errorf("bench: grpc fetch of %d bytes: %w", req.Value, ErrRawTooLarge)
	}
	n := int(req.Value)
	g.mu.Lock()
	if len(g.data) < n {
		g.data = make([]byte, n)
		FillPattern(g.data)
	}
	data := g.data[:n]
	g.mu.Unlock()
	return &wrapperspb.BytesValue{Value: data}, nil
}

// control is the same control call as starwire's MethodControl.
func (g *GRPCServer) control(ctx context.Context, req *tfpb.RecvTensorRequest) (*tfpb.RecvTensorResponse, error) {
	return control(ctx, req)
}

// GRPCClient calls the gRPC contender over one connection. Safe for
// concurrent use.
type GRPCClient struct {
	cc *grpc.ClientConn
}

// DialGRPC returns a client of the gRPC server at addr.
func DialGRPC(addr string) (*GRPCClient, error) {
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(grpcMaxMsg), grpc.MaxCallSendMsgSize(grpcMaxMsg)))
	if err != nil {
		return nil, fmt.Errorf("bench: grpc dial %s: %w", addr, err)
	}
	return &GRPCClient{cc: cc}, nil
}

// Close closes the connection.
func (c *GRPCClient) Close() error { return c.cc.Close() }

// Echo sends req and returns the answer's bytes, which must equal req.
func (c *GRPCClient) Echo(ctx context.Context, req []byte) ([]byte, error) {
	var resp wrapperspb.BytesValue
	if err := c.cc.Invoke(ctx, grpcEchoPath, &wrapperspb.BytesValue{Value: req}, &resp); err != nil {
		return nil, fmt.Errorf("bench: grpc echo: %w", err)
	}
	if len(resp.Value) != len(req) {
		return nil, fmt.Errorf("bench: grpc echo of %d bytes, want %d", len(resp.Value), len(req))
	}
	return resp.Value, nil
}

// Fetch asks for n bytes and returns them as gRPC received them.
func (c *GRPCClient) Fetch(ctx context.Context, n int) ([]byte, error) {
	var resp wrapperspb.BytesValue
	if err := c.cc.Invoke(ctx, grpcFetchPath, &wrapperspb.UInt64Value{Value: uint64(n)}, &resp); err != nil {
		return nil, fmt.Errorf("bench: grpc fetch: %w", err)
	}
	if len(resp.Value) != n {
		return nil, fmt.Errorf("bench: grpc fetch answered %d bytes, want %d", len(resp.Value), n)
	}
	return resp.Value, nil
}

// Control makes one control call.
func (c *GRPCClient) Control(ctx context.Context, req *tfpb.RecvTensorRequest, resp *tfpb.RecvTensorResponse) error {
	if err := c.cc.Invoke(ctx, grpcControlPath, req, resp); err != nil {
		return fmt.Errorf("bench: grpc control: %w", err)
	}
	return nil
}
