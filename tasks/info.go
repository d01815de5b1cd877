package tasks

import (
	"context"
	"fmt"

	"github.com/starwire/starwire/netpath"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// Info is what a task says about itself on its gRPC port
// (starwire.TaskInfo/Get): what carried its calls to its peers, and how
// many. A driver in another process reads it to report the path the tasks
// really used.
type Info struct {
	Task string
	// PeerPath is Server.PeerPath.
	PeerPath string
	// PeerCalls and PeerBytes count the task's calls to its peers.
	PeerCalls, PeerBytes int64
	// PeerPaths count its starwire calls to its peers by the path each
	// took, as the transport that carried it reported (rpc.ClientInfo.Path).
	PeerPaths []PathCount
}

const (
	infoFile    = "starwire/taskinfo.proto"
	infoService = "starwire.TaskInfo"
	infoGet     = "/" + infoService + "/Get"
)

// The service is described in the global registry, as generated code would
// do, so that gRPC server reflection can show it to grpcurl. Its
// dependencies registered themselves when emptypb and structpb were
// imported.
func init() {
	fd := &descriptorpb.FileDescriptorProto{
		Name:       proto.String(infoFile),
		Package:    proto.String("starwire"),
		Dependency: []string{"google/protobuf/empty.proto", "google/protobuf/struct.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("TaskInfo"),
			Method: []*descriptorpb.MethodDescriptorProto{{
				Name:       proto.String("Get"),
				InputType:  proto.String(".google.protobuf.Empty"),
				OutputType: proto.String(".google.protobuf.Struct"),
			}},
		}},
		Syntax: proto.String("proto3"),
	}
	f, err := protodesc.NewFile(fd, protoregistry.GlobalFiles)
	if err == nil {
		err = protoregistry.GlobalFiles.RegisterFile(f)
	}
	if err != nil {
		panic(fmt.Sprintf("tasks: describe %s: %v", infoFile, err))
	}
}

type infoServer interface{ Info() Info }

var infoDesc = grpc.ServiceDesc{
	ServiceName: infoService,
	HandlerType: (*infoServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Get",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(emptypb.Empty)); err != nil {
				return nil, err
			}
			return srv.(infoServer).Info().toStruct(), nil
		},
	}},
	Metadata: infoFile,
}

// Info returns what the task says about itself.
func (s *Server) Info() Info {
	calls, bytes := s.PeerStats()
	return Info{Task: s.Task(), PeerPath: s.PeerPath(), PeerCalls: calls, PeerBytes: bytes, PeerPaths: s.paths.counts()}
}

func (i Info) toStruct() *structpb.Struct {
	paths := make([]*structpb.Value, len(i.PeerPaths))
	for k, p := range i.PeerPaths {
		paths[k] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
			"path":  structpb.NewStringValue(string(p.Path)),
			"calls": structpb.NewNumberValue(float64(p.Calls)),
			"bytes": structpb.NewNumberValue(float64(p.Bytes)),
		}})
	}
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"task":       structpb.NewStringValue(i.Task),
		"peer_path":  structpb.NewStringValue(i.PeerPath),
		"peer_calls": structpb.NewNumberValue(float64(i.PeerCalls)),
		"peer_bytes": structpb.NewNumberValue(float64(i.PeerBytes)),
		"peer_paths": structpb.NewListValue(&structpb.ListValue{Values: paths}),
	}}
}

// QueryInfo asks the task serving gRPC at addr for its Info, in plaintext
// unless opts say otherwise (Layout.GRPCDialOptions).
func QueryInfo(ctx context.Context, addr string, opts ...grpc.DialOption) (Info, error) {
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		return Info{}, fmt.Errorf("task info from %s: %w", addr, err)
	}
	defer cc.Close()
	var out structpb.Struct
	if err := cc.Invoke(ctx, infoGet, &emptypb.Empty{}, &out); err != nil {
		return Info{}, fmt.Errorf("task info from %s: %w", addr, err)
	}
	f := out.GetFields()
	var paths []PathCount
	for _, v := range f["peer_paths"].GetListValue().GetValues() {
		p := v.GetStructValue().GetFields()
		paths = append(paths, PathCount{Path: netpath.Path(p["path"].GetStringValue()), Calls: int64(p["calls"].GetNumberValue()), Bytes: int64(p["bytes"].GetNumberValue())})
	}
	return Info{
		Task:      f["task"].GetStringValue(),
		PeerPath:  f["peer_path"].GetStringValue(),
		PeerCalls: int64(f["peer_calls"].GetNumberValue()),
		PeerBytes: int64(f["peer_bytes"].GetNumberValue()),
		PeerPaths: paths,
	}, nil
}
