package staleness

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The gRPC side uses a raw codec rather than protobuf: a message is the
// version as 8 little-endian bytes followed by the blob. That is the least
// work gRPC can do for a blob, so the comparison does not charge it for
// protobuf encoding.

// message is what travels in both directions. On unmarshal, a blob the size
// of dst lands in dst; any other blob is copied to data.
type message struct {
	version uint64
	data    []byte
	dst     []byte
}

type rawCodec struct{}

// Name implements encoding.Codec.
func (rawCodec) Name() string { return "starwire-staleness-raw" }

// Marshal implements encoding.Codec: version then blob, one copy.
func (rawCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(*message)
	if !ok {
		return nil, fmt.Errorf("staleness: raw codec cannot marshal %T", v)
	}
	out := make([]byte, 8+len(m.data))
	binary.LittleEndian.PutUint64(out, m.version)
	copy(out[8:], m.data)
	return out, nil
}

// Unmarshal implements encoding.Codec.
func (rawCodec) Unmarshal(b []byte, v any) error {
	m, ok := v.(*message)
	if !ok {
		return fmt.Errorf("staleness: raw codec cannot unmarshal %T", v)
	}
	if len(b) < 8 {
		return fmt.Errorf("staleness: message of %d bytes, want at least 8", len(b))
	}
	m.version = binary.LittleEndian.Uint64(b)
	blob := b[8:]
	switch {
	case len(blob) == 0:
		m.data = nil
	case len(blob) == len(m.dst):
		m.data = m.dst[:copy(m.dst, blob)]
	default:
		m.data = append([]byte(nil), blob...)
	}
	return nil
}

const (
	grpcService = "starwire.staleness.ParameterServer"
	grpcPush    = "/" + grpcService + "/Push"
	grpcPull    = "/" + grpcService + "/Pull"
	grpcWait    = "/" + grpcService + "/Wait"
)

type grpcServer interface{ store() *store }

type grpcStore struct{ st *store }

func (g grpcStore) store() *store { return g.st }

var grpcDesc = grpc.ServiceDesc{
	ServiceName: grpcService,
	HandlerType: (*grpcServer)(nil),
	Methods: []grpc.MethodDesc{
		{MethodName: "Push", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var m message
			if err := dec(&m); err != nil {
				return nil, err
			}
			srv.(grpcServer).store().put(m.version, m.data, nil)
			return &message{version: m.version}, nil
		}},
		{MethodName: "Pull", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var m message
			if err := dec(&m); err != nil {
				return nil, err
			}
			v, data, _ := srv.(grpcServer).store().get(m.version)
			return &message{version: v, data: data}, nil
		}},
		{MethodName: "Wait", Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			var m message
			if err := dec(&m); err != nil {
				return nil, err
			}
			// gRPC marshals every answer into a buffer of its own: a copy
			// of the blob per worker.
			v, data, _, ok := srv.(grpcServer).store().await(ctx, m.version)
			if !ok {
				return nil, status.Error(codes.Canceled, "wait: the run ended")
			}
			return &message{version: v, data: data}, nil
		}},
	},
}

// startGRPC serves st over gRPC on a free loopback port.
func startGRPC(st *store, maxMsg int) (addr string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("staleness: grpc server: %w", err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg))
	srv.RegisterService(&grpcDesc, grpcStore{st})
	go srv.Serve(l)
	return l.Addr().String(), srv.Stop, nil
}

type grpcConn struct {
	cc   *grpc.ClientConn
	opts []grpc.CallOption
}

func dialGRPC(addr string, maxMsg int) (*grpcConn, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("staleness: dial grpc %s: %w", addr, err)
	}
	return &grpcConn{cc: cc, opts: []grpc.CallOption{
		grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(maxMsg), grpc.MaxCallSendMsgSize(maxMsg),
	}}, nil
}

func (g *grpcConn) push(ctx context.Context, version uint64, blob []byte) error {
	var ack message
	return g.cc.Invoke(ctx, grpcPush, &message{version: version, data: blob}, &ack, g.opts...)
}

func (g *grpcConn) pull(ctx context.Context, have uint64, dst []byte) (uint64, bool, error) {
	return g.get(ctx, grpcPull, have, dst)
}

func (g *grpcConn) wait(ctx context.Context, have uint64, dst []byte) (uint64, bool, error) {
	return g.get(ctx, grpcWait, have, dst)
}

func (g *grpcConn) get(ctx context.Context, method string, have uint64, dst []byte) (uint64, bool, error) {
	resp := message{dst: dst}
	if err := g.cc.Invoke(ctx, method, &message{version: have}, &resp, g.opts...); err != nil {
		return 0, false, err
	}
	if resp.data != nil && len(resp.data) != len(dst) {
		return 0, false, fmt.Errorf("staleness: pull answered with %d bytes, want %d", len(resp.data), len(dst))
	}
	return resp.version, resp.data != nil, nil
}

func (g *grpcConn) close() { g.cc.Close() }
