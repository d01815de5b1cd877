package handlers

import (
	"errors"
	"strings"
	"testing"

	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestRunGraphErrorsInResponseBody checks that, with
// store_errors_in_response_body, every kind of RunGraph failure (a feed
// that does not decode, a feed of the wrong type, a failing op, an unknown
// graph) comes back in the response with TensorFlow's code and the call
// succeeds, over starwire and gRPC; and that without it, the call fails with
// the same code.
func TestRunGraphErrorsInResponseBody(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	dev, inc := task.w.Device(), task.w.Incarnation()
	f := wire.DTFloat
	feedReg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	varReg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		NodeDef("v", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{2})),
		NodeDef("read", "ReadVariableOp", In("v"), Attrs("dtype", f)),
		FetchNode("read/_send", "read", "read:0", f, dev, inc),
	)})
	if err != nil {
		t.Fatal(err)
	}
	xKey, zKey := FeedKey("x:0", dev), FetchKey("z:0", dev, inc)
	// 3 floats' bytes for a [1,2] tensor: does not decode.
	undecodable := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: &tfpb.TensorShapeProto{Dim: []*tfpb.TensorShapeProto_Dim{{Size: 1}, {Size: 2}}}, TensorContent: make([]byte, 12)}
	wrongType := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT64, TensorShape: &tfpb.TensorShapeProto{Dim: []*tfpb.TensorShapeProto_Dim{{Size: 1}, {Size: 2}}}, Int64Val: []int64{1}}
	tests := []struct {
		name string
		req  *tfpb.RunGraphRequest
		code wire.Code
		msg  string
	}{
		{"feed does not decode", &tfpb.RunGraphRequest{GraphHandle: feedReg.GraphHandle, Send: []*tfpb.NamedTensorProto{{Name: xKey, Tensor: undecodable}}, RecvKey: []string{zKey}},
			wire.InvalidArgument, "needs 8 bytes of content, has 12"},
		{"feed of wrong type", &tfpb.RunGraphRequest{GraphHandle: feedReg.GraphHandle, Send: []*tfpb.NamedTensorProto{{Name: xKey, Tensor: wrongType}}, RecvKey: []string{zKey}},
			wire.InvalidArgument, `node "x" takes float`},
		{"uninitialized variable", &tfpb.RunGraphRequest{GraphHandle: varReg.GraphHandle, RecvKey: []string{FetchKey("read:0", dev, inc)}},
			wire.FailedPrecondition, "uninitialized"},
		{"unknown graph", &tfpb.RunGraphRequest{GraphHandle: "nope"}, wire.Aborted, `"nope" is not registered`},
	}
	for _, tr := range transports(task) {
		for i, tt := range tests {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				req := proto.CloneOf(tt.req)
				req.StepId = int64(100 + i)
				defer task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: req.StepId})
				err := tr.call(ctx, MethodRunGraph, req, new(tfpb.RunGraphResponse))
				if tr.code(err) != tt.code || !strings.Contains(err.Error(), tt.msg) {
					t.Fatalf("without store_errors_in_response_body: %v (code %v), want %v containing %q", err, tr.code(err), tt.code, tt.msg)
				}
				req.StoreErrorsInResponseBody = true
				resp := new(tfpb.RunGraphResponse)
				if err := tr.call(ctx, MethodRunGraph, req, resp); err != nil {
					t.Fatalf("with store_errors_in_response_body, the call failed: %v", err)
				}
				if wire.Code(resp.GetStatusCode()) != tt.code || !strings.Contains(resp.GetStatusErrorMessage(), tt.msg) || len(resp.GetRecv()) != 0 {
					t.Fatalf("response = %v, want status %v containing %q and no recv", resp, tt.code, tt.msg)
				}
			})
		}
	}
	if steps, keys := task.w.Rendezvous().Len(); keys != 0 || steps != 0 {
		t.Fatalf("rendezvous holds %d steps and %d keys after cleanup", steps, keys)
	}
}

// TestFetchEncodingError checks that a fetched tensor gRPC cannot encode
// fails with Internal, naming the fetch, and that runGraphFailed puts that
// in the body when asked.
func TestFetchEncodingError(t *testing.T) {
	resp := &tfpb.RunGraphResponse{Recv: []*tfpb.NamedTensorProto{{Name: "z:0"}}}
	// Shape [4] of floats with 8 bytes: inconsistent.
	bad := []wire.Tensor{{DType: wire.DTFloat, Shape: []int64{4}, Data: make([]byte, 8)}}
	err := fetchesToProto(resp, bad)
	if status.CodeOf(err) != wire.Internal || !strings.Contains(err.Error(), `recv "z:0"`) {
		t.Fatalf("err = %v", err)
	}
	body, err2 := runGraphFailed(&tfpb.RunGraphRequest{StoreErrorsInResponseBody: true}, err)
	if err2 != nil || body.GetStatusCode() != tfpb.Code_INTERNAL || body.GetStatusErrorMessage() != statusMessage(err) {
		t.Fatalf("in body: %v, %v", body, err2)
	}
	if _, err2 := runGraphFailed(&tfpb.RunGraphRequest{}, err); err2 != err {
		t.Fatalf("without the flag: %v", err2)
	}
	// A message that is not UTF-8 still encodes.
	body, _ = runGraphFailed(&tfpb.RunGraphRequest{StoreErrorsInResponseBody: true}, status.Errorf(wire.InvalidArgument, "bad \xff name"))
	if _, err := proto.Marshal(body); err != nil {
		t.Fatal(err)
	}
}

// TestUnknownOpOverBothTransports checks that RegisterGraph answers an op
// this binary lacks with NotFound in TensorFlow's words, without the
// code's name in the message, over starwire and gRPC.
func TestUnknownOpOverBothTransports(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	req := &tfpb.RegisterGraphRequest{GraphDef: GraphDef(NodeDef("q", "PriorityQueueV2", nil, nil))}
	for _, tr := range transports(task) {
		t.Run(tr.name, func(t *testing.T) {
			err := tr.call(ctx, MethodRegisterGraph, req, new(tfpb.RegisterGraphResponse))
			msg := grpcstatus.Convert(err).Message()
			if st := (*status.Status)(nil); errors.As(err, &st) {
				msg = st.Msg
			}
			if tr.code(err) != wire.NotFound || !strings.HasPrefix(msg, "Op type not registered 'PriorityQueueV2' in binary running on ") {
				t.Fatalf("err = %v (code %v), message %q", err, tr.code(err), msg)
			}
		})
	}
}
