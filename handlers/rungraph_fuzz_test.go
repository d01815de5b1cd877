package handlers

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// FuzzRunGraph decodes whatever a RunGraph request's metadata holds, over
// starwire (tensors in the protobuf) and gRPC, against a worker with the
// feed graph registered: the worker must answer every request without
// panicking or hanging, put every failure in the body when
// store_errors_in_response_body is set, and leave nothing in its
// rendezvous once the step is cleaned up. The seeds are requests as a
// master sends them: good and bad feeds, unknown fetches and graphs.
func FuzzRunGraph(f *testing.F) {
	w, err := NewWorker(Options{Job: "worker", Incarnation: 9})
	if err != nil {
		f.Fatal(err)
	}
	reg, err := w.registerGraph(&tfpb.RegisterGraphRequest{GraphDef: feedGraph(w)})
	if err != nil {
		f.Fatal(err)
	}
	dev := w.Device()
	x := F32([]int64{2, 2}, 1, 2, 3, 4)
	xp, _ := tensor.ToProto(&x)
	x.Buf.Release()
	bad := proto.CloneOf(xp)
	bad.TensorContent = bad.TensorContent[:12]
	// Strings as a TensorFlow client sends them, in tensor_content: a
	// checkpoint prefix fed to a float feed, and a list whose lengths run
	// past its bytes.
	prefix := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorContent: tensor.AppendStringList(nil, [][]byte{[]byte("ckpt/model")})}
	badStrings := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: tensor.ShapeToProto([]int64{2}), TensorContent: []byte("\x03\x09abc")}
	for i, req := range []*tfpb.RunGraphRequest{
		{GraphHandle: reg.GraphHandle, StepId: 1, Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{FetchKey("z:0", dev, 9)}},
		{GraphHandle: reg.GraphHandle, StepId: 2, StoreErrorsInResponseBody: true, Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: bad}}, RecvKey: []string{FetchKey("z:0", dev, 9)}},
		{GraphHandle: reg.GraphHandle, StepId: 3, StoreErrorsInResponseBody: true, Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{"z", "w:0"}},
		{GraphHandle: "nope", StepId: 4, StoreErrorsInResponseBody: true},
		{GraphHandle: reg.GraphHandle, StepId: 5, StoreErrorsInResponseBody: true, Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: prefix}}, RecvKey: []string{FetchKey("z:0", dev, 9)}},
		{GraphHandle: reg.GraphHandle, StepId: 6, Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: badStrings}}, RecvKey: []string{FetchKey("z:0", dev, 9)}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(i, err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req := new(tfpb.RunGraphRequest)
		decodes := proto.Unmarshal(b, req) == nil
		var resp rpc.Response
		err := w.handleRunGraph(ctx, &wire.Inbound{Meta: b}, &resp)
		for i := range resp.Tensors {
			resp.Tensors[i].Buf.Release()
		}
		if decodes && req.GetStoreErrorsInResponseBody() && err != nil {
			t.Fatalf("starwire: store_errors_in_response_body, yet the call failed: %v", err)
		}
		if !decodes && status.CodeOf(err) != wire.InvalidArgument {
			t.Fatalf("starwire: undecodable request answered %v", err)
		}
		if decodes {
			gresp, err := w.GRPCService().RunGraph(ctx, req)
			if req.GetStoreErrorsInResponseBody() && (err != nil || gresp == nil) {
				t.Fatalf("gRPC: store_errors_in_response_body, yet the call failed: %v", err)
			}
		}
		w.cleanupGraph(&tfpb.CleanupGraphRequest{StepId: req.GetStepId()})
		if steps, keys := w.Rendezvous().Len(); steps != 0 || keys != 0 {
			t.Fatalf("rendezvous holds %d steps and %d keys after cleanup", steps, keys)
		}
	})
}
