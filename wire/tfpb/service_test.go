package tfpb

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// workerMethods is every method TensorFlow's gRPC worker serves.
var workerMethods = []string{
	"GetStatus", "CreateWorkerSession", "DeleteWorkerSession", "RegisterGraph",
	"DeregisterGraph", "RunGraph", "CleanupGraph", "CleanupAll", "RecvTensor",
	"Logging", "Tracing", "RecvBuf", "GetStepSequence", "CompleteGroup",
	"CompleteInstance", "MarkRecvFinished",
}

func TestWorkerServiceDescriptorPaths(t *testing.T) {
	sd := File_wire_tfpb_worker_service_proto.Services().ByName("WorkerService")
	if sd == nil {
		t.Fatal("WorkerService not declared")
	}
	if got := string(sd.FullName()); got != "tensorflow.WorkerService" {
		t.Fatalf("service full name %q, want tensorflow.WorkerService", got)
	}
	methods := sd.Methods()
	if methods.Len() != len(workerMethods) {
		t.Fatalf("service has %d methods, want %d", methods.Len(), len(workerMethods))
	}
	for i := range methods.Len() {
		m := methods.Get(i)
		if m.IsStreamingClient() || m.IsStreamingServer() {
			t.Errorf("%s is streaming; TensorFlow's worker methods are unary", m.Name())
		}
		path := "/" + string(sd.FullName()) + "/" + string(m.Name())
		if want := "/tensorflow.WorkerService/" + string(m.Name()); path != want {
			t.Errorf("method path %q, want %q", path, want)
		}
	}
	for _, name := range workerMethods {
		if methods.ByName(protoName(name)) == nil {
			t.Errorf("method %s missing", name)
		}
	}
}

func TestWorkerServiceDescGRPC(t *testing.T) {
	if WorkerService_ServiceDesc.ServiceName != "tensorflow.WorkerService" {
		t.Fatalf("grpc service name %q", WorkerService_ServiceDesc.ServiceName)
	}
	registered := map[string]bool{}
	for _, m := range WorkerService_ServiceDesc.Methods {
		registered[m.MethodName] = true
	}
	for _, name := range workerMethods {
		if !registered[name] {
			t.Errorf("grpc method %s not registered", name)
		}
	}
	if len(WorkerService_ServiceDesc.Streams) != 0 {
		t.Errorf("unexpected streams %v", WorkerService_ServiceDesc.Streams)
	}
}

// recvServer answers RecvTensor and records the method paths it was called on.
type recvServer struct {
	UnimplementedWorkerServiceServer
}

func (recvServer) RecvTensor(_ context.Context, req *RecvTensorRequest) (*RecvTensorResponse, error) {
	return &RecvTensorResponse{
		Tensor:          &TensorProto{Dtype: DataType_DT_INT64, Int64Val: []int64{req.GetStepId()}},
		SendStartMicros: 1,
	}, nil
}

// TestWorkerServiceOnTheWire calls the generated server through a raw
// connection by the literal path TensorFlow's client uses, proving the path is
// what goes on the wire and not only what the descriptor says.
func TestWorkerServiceOnTheWire(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var seen []string
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		mu.Lock()
		seen = append(seen, info.FullMethod)
		mu.Unlock()
		return h(ctx, req)
	}))
	RegisterWorkerServiceServer(srv, recvServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	resp := new(RecvTensorResponse)
	req := &RecvTensorRequest{StepId: 42, RendezvousKey: "k"}
	if err := conn.Invoke(ctx, "/tensorflow.WorkerService/RecvTensor", req, resp); err != nil {
		t.Fatalf("invoke by literal path: %v", err)
	}
	want := &RecvTensorResponse{Tensor: &TensorProto{Dtype: DataType_DT_INT64, Int64Val: []int64{42}}, SendStartMicros: 1}
	if !proto.Equal(resp, want) {
		t.Fatalf("response %v, want %v", resp, want)
	}
	if _, err := NewWorkerServiceClient(conn).RecvTensor(ctx, req); err != nil {
		t.Fatalf("generated client: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range seen {
		if p != "/tensorflow.WorkerService/RecvTensor" {
			t.Errorf("server saw path %q", p)
		}
	}
	if len(seen) != 2 {
		t.Errorf("server saw %d calls, want 2", len(seen))
	}
}
