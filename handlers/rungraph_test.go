package handlers

import (
	"errors"
	"strings"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// feedGraph is x (a client-terminated _Recv of [?,2] floats) times a
// constant, fetched through a client-terminated _Send.
func feedGraph(w *Worker) *tfpb.GraphDef {
	dev := w.Device()
	x := FeedNode("x", "x:0", wire.DTFloat, dev)
	x.Attr["_output_shapes"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{
		Shape: []*tfpb.TensorShapeProto{{Dim: []*tfpb.TensorShapeProto_Dim{{Size: -1}, {Size: 2}}}}}}}
	return GraphDef(
		x,
		ConstF32("w", []int64{2, 1}, 1, 2),
		NodeDef("z", "MatMul", In("x", "w"), Attrs("T", wire.DTFloat)),
		FetchNode("z/_send", "z", "z:0", wire.DTFloat, dev, w.Incarnation()),
	)
}

func TestRunGraphFeedsOverStarwire(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	reg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	dev, inc := task.w.Device(), task.w.Incarnation()
	good := F32([]int64{3, 2}, 1, 1, 2, 0, 0, 3)
	defer good.Buf.Release()
	run := func(step int64, sends map[string]wire.Tensor, fetch string) ([]string, []float32, error) {
		req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step, RecvKey: []string{fetch}}
		var feeds []Feed
		for k, v := range sends {
			feeds = append(feeds, Feed{Key: k, Tensor: v})
		}
		var out Fetched
		defer out.Release()
		err := task.star.RunGraph(ctx, req, feeds, &out)
		defer task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
		if err != nil {
			return nil, nil, err
		}
		return out.Keys, Floats(&out.Tensors[0]), nil
	}
	xKey, zKey := FeedKey("x:0", dev), FetchKey("z:0", dev, inc)
	recv, got, err := run(1, map[string]wire.Tensor{xKey: good}, zKey)
	if err != nil {
		t.Fatal(err)
	}
	if !ApproxEqual(got, []float32{3, 2, 6}) || recv[0] != zKey {
		t.Fatalf("z = %v (recv %v)", got, recv)
	}

	badDType := I64([]int64{3, 2})
	defer badDType.Buf.Release()
	badShape := F32([]int64{2, 3})
	defer badShape.Buf.Release()
	tests := []struct {
		name  string
		sends map[string]wire.Tensor
		fetch string
		msg   string
	}{
		{"dtype", map[string]wire.Tensor{xKey: badDType}, zKey, "is int64, node \"x\" takes float"},
		{"shape", map[string]wire.Tensor{xKey: badShape}, zKey, "has shape [2 3], node \"x\" takes [-1 2]"},
		{"unknown feed", map[string]wire.Tensor{xKey: good, FeedKey("y:0", dev): good}, zKey, "feeds no client-terminated _Recv"},
		{"missing feed", nil, zKey, "is not fed"},
		{"unknown fetch", map[string]wire.Tensor{xKey: good}, FetchKey("q:0", dev, inc), "no client-terminated _Send"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := run(int64(10+i), tt.sends, tt.fetch)
			if !errors.Is(err, status.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want InvalidArgument containing %q", err, tt.msg)
			}
		})
	}
	// The worker keeps serving.
	if _, got, err := run(2, map[string]wire.Tensor{xKey: good}, zKey); err != nil || !ApproxEqual(got, []float32{3, 2, 6}) {
		t.Fatalf("after bad feeds: %v, %v", got, err)
	}
	if steps, keys := task.w.Rendezvous().Len(); keys != 0 || steps != 0 {
		t.Fatalf("rendezvous holds %d steps and %d keys after cleanup", steps, keys)
	}
}

func TestRunGraphOverGRPC(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	reg, err := task.grpc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	dev, inc := task.w.Device(), task.w.Incarnation()
	x := F32([]int64{1, 2}, 3, 4)
	defer x.Buf.Release()
	xp, _ := tensor.ToProto(&x)
	resp, err := task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 5,
		Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{FetchKey("z:0", dev, inc)}})
	if err != nil {
		t.Fatal(err)
	}
	z, err := tensor.FromProto(resp.Recv[0].GetTensor())
	if err != nil {
		t.Fatal(err)
	}
	defer z.Buf.Release()
	if !ApproxEqual(Floats(&z), []float32{11}) {
		t.Fatalf("z = %v", Floats(&z))
	}
	// A bad feed is InvalidArgument over gRPC too.
	xp.Dtype = tfpb.DataType_DT_INT32
	xp.TensorContent = xp.TensorContent[:8]
	_, err = task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 6,
		Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{FetchKey("z:0", dev, inc)}})
	if code := grpcCode(err); code != wire.InvalidArgument {
		t.Fatalf("bad feed over gRPC: %v (code %v)", err, code)
	}
	// store_errors_in_response_body puts the error in the response.
	resp, err = task.grpc.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 7, StoreErrorsInResponseBody: true,
		Send: []*tfpb.NamedTensorProto{{Name: FeedKey("x:0", dev), Tensor: xp}}, RecvKey: []string{FetchKey("z:0", dev, inc)}})
	if err != nil || resp.GetStatusCode() != tfpb.Code_INVALID_ARGUMENT || resp.GetStatusErrorMessage() == "" {
		t.Fatalf("stored error: %v, %v", resp, err)
	}
}
