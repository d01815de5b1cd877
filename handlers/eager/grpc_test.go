package eager

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// dialService serves s over gRPC on loopback and returns a client.
func dialService(t *testing.T, s *Service) tfpb.EagerServiceClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	tfpb.RegisterEagerServiceServer(g, s.GRPC())
	go g.Serve(l)
	t.Cleanup(g.Stop)
	cc, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return tfpb.NewEagerServiceClient(cc)
}

// TestGRPCCodes checks that errors reach a gRPC client with TensorFlow's
// code and without the code's name in the message.
func TestGRPCCodes(t *testing.T) {
	c := dialService(t, newTestService(t, Options{}))
	_, err := c.KeepAlive(context.Background(), &tfpb.KeepAliveRequest{ContextId: 9})
	st := grpcstatus.Convert(err)
	want := "Unable to find a context_id matching the specified one (9). Perhaps the worker was restarted, or the context was GC'd?"
	if st.Code() != codes.Aborted || st.Message() != want {
		t.Fatalf("KeepAlive of an unknown context: %v %q", st.Code(), st.Message())
	}
}

// TestStreamingEnqueue answers each request of a stream in order, and
// ends the stream with the error of a failed one.
func TestStreamingEnqueue(t *testing.T) {
	s := newTestService(t, Options{})
	c := dialService(t, s)
	create(t, s, 1, 0, 0)
	stream, err := c.StreamingEnqueue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*tfpb.EnqueueRequest{
		{ContextId: 1, Queue: []*tfpb.QueueItem{varHandle(1, []int64{1}, "")}},
		{ContextId: 1, Queue: []*tfpb.QueueItem{operation(2, "AssignVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0), inline(floats([]int64{1}, 4)))}},
		{ContextId: 1, Queue: []*tfpb.QueueItem{{Item: &tfpb.QueueItem_SyncRemoteExecutorForStream{SyncRemoteExecutorForStream: &tfpb.SyncRemoteExecutorForStream{}}}}},
		{ContextId: 1, Queue: []*tfpb.QueueItem{operation(invalidOpID, "ReadVariableOp", Attrs("dtype", wire.DTFloat), remote(1, 0))}},
	}
	for i, req := range reqs {
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(resp.GetQueueResponse()) != 1 {
			t.Fatalf("request %d answered %v", i, resp)
		}
		if i == 3 {
			if v := protoFloats(t, resp.GetQueueResponse()[0].GetTensor()[0]); !ApproxEqual(v, []float32{4}) {
				t.Fatalf("read %v over the stream", v)
			}
		}
	}
	if err := stream.Send(&tfpb.EnqueueRequest{ContextId: 1, Queue: []*tfpb.QueueItem{operation(3, "NoSuchOp", nil)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); grpcstatus.Code(err) != codes.NotFound {
		t.Fatalf("a failed request on the stream: %v, want NotFound", err)
	}
}
