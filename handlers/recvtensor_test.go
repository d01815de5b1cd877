package handlers

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestRecvTensorSteadyStateAllocs measures the server side of a RecvTensor
// whose tensor is already in the rendezvous: decoding the request, the
// rendezvous hand-off and encoding the response.
func TestRecvTensorSteadyStateAllocs(t *testing.T) {
	w, err := NewWorker(Options{Job: "ps", Incarnation: 0xabc})
	if err != nil {
		t.Fatal(err)
	}
	key := CreateKey(w.Device(), w.Incarnation(), "/job:worker/replica:0/task:0/device:CPU:0", "emb/read:0", FrameIter{})
	meta, _ := proto.Marshal(&tfpb.RecvTensorRequest{StepId: 77, RendezvousKey: key, RequestId: 5})
	x := f32([]int64{64, 16})
	defer x.Buf.Release()
	in := &wire.Inbound{Meta: meta}
	resp := &rpc.Response{Meta: make([]byte, 0, 256), Tensors: make([]wire.Tensor, 0, 1)}
	ctx := context.Background()
	once := func() {
		if err := w.rendezvous.Send(77, key, refTensor(x)); err != nil {
			t.Fatal(err)
		}
		if err := w.handleRecvTensor(ctx, in, resp); err != nil {
			t.Fatal(err)
		}
		// What the server does once the response is sent.
		resp.Tensors[0].Buf.Release()
		resp.Tensors, resp.Meta = resp.Tensors[:0], resp.Meta[:0]
	}
	once()
	allocs := testing.AllocsPerRun(1000, once)
	t.Logf("server-side allocations per steady-state RecvTensor: %v", allocs)
	if allocs > 0 {
		t.Fatalf("steady-state RecvTensor allocates %v times per call, want 0", allocs)
	}
	// The response decodes as a RecvTensorResponse with dtype and shape.
	once2 := func() *tfpb.RecvTensorResponse {
		w.rendezvous.Send(77, key, refTensor(x))
		if err := w.handleRecvTensor(ctx, in, resp); err != nil {
			t.Fatal(err)
		}
		defer func() {
			resp.Tensors[0].Buf.Release()
			resp.Tensors, resp.Meta = resp.Tensors[:0], resp.Meta[:0]
		}()
		m := new(tfpb.RecvTensorResponse)
		if err := proto.Unmarshal(resp.Meta, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := once2()
	shape, _ := ShapeFromProto(m.GetTensor().GetTensorShape())
	if m.GetTensor().GetDtype() != tfpb.DataType_DT_FLOAT || !sameShape(shape, []int64{64, 16}) || m.GetSendStartMicros() == 0 || m.GetIsDead() || len(m.GetTensor().GetTensorContent()) != 0 {
		t.Fatalf("response %v", m)
	}
	w.rendezvous.Cleanup(77, errStepCleaned)
}

func BenchmarkRecvTensorHandler(b *testing.B) {
	w, _ := NewWorker(Options{Job: "ps", Incarnation: 1})
	key := CreateKey(w.Device(), 1, "/job:worker/replica:0/task:0/device:CPU:0", "t", FrameIter{})
	meta, _ := proto.Marshal(&tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: key})
	x := f32([]int64{1024})
	defer x.Buf.Release()
	in := &wire.Inbound{Meta: meta}
	resp := &rpc.Response{}
	b.ReportAllocs()
	b.SetBytes(int64(len(x.Data)))
	for b.Loop() {
		w.rendezvous.Send(1, key, refTensor(x))
		w.handleRecvTensor(context.Background(), in, resp)
		resp.Tensors[0].Buf.Release()
		resp.Tensors, resp.Meta = resp.Tensors[:0], resp.Meta[:0]
	}
}

func TestRecvTensorChecksKey(t *testing.T) {
	task := startTask(t, Options{Job: "ps", Incarnation: 0x1234})
	ctx := testCtx(t)
	dst := "/job:worker/replica:0/task:0/device:CPU:0"
	var reply rpc.Reply
	defer reply.Release()
	tests := []struct {
		name, key string
		code      error
		msg       string
	}{
		{"old incarnation", CreateKey(task.w.Device(), 0x1233, dst, "t", FrameIter{}), rpc.ErrAborted, "the task restarted"},
		{"other device", CreateKey("/job:ps/replica:0/task:1/device:CPU:0", 0x1234, dst, "t", FrameIter{}), rpc.ErrInvalidArgument, "is not sent from"},
		{"malformed", "not;a;key", rpc.ErrInvalidArgument, "malformed rendezvous key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := task.wc.RecvTensor(ctx, 1, tt.key, &reply)
			if !errors.Is(err, tt.code) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
			_, err = task.grpc.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: tt.key})
			if grpcCode(err) != rpc.CodeOf(tt.code) {
				t.Fatalf("over gRPC: %v", err)
			}
		})
	}
	// An unpadded incarnation is still this worker's.
	unpadded := task.w.Device() + ";1234;" + dst + ";t;0:0"
	task.w.rendezvous.Send(1, unpadded, f32([]int64{1}, 9))
	if _, err := task.wc.RecvTensor(ctx, 1, unpadded, &reply); err != nil {
		t.Fatalf("unpadded incarnation: %v", err)
	}
}

func TestFuseRecvTensor(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	dst := "/job:worker/replica:0/task:0/device:CPU:0"
	var keys []string
	for i, name := range []string{"a", "b", "c"} {
		k := CreateKey(task.w.Device(), task.w.Incarnation(), dst, name, FrameIter{})
		keys = append(keys, k)
		if name == "b" {
			// A dead tensor travels as is_dead with no data.
			task.w.rendezvous.Send(4, k, wire.Tensor{DType: wire.DTFloat, Dead: true})
			continue
		}
		task.w.rendezvous.Send(4, k, f32([]int64{int64(i + 1)}, 1, 2, 3))
	}
	var reply rpc.Reply
	defer reply.Release()
	resps, err := task.wc.FuseRecvTensor(ctx, 4, keys, &reply)
	if err != nil {
		t.Fatal(err)
	}
	if len(resps) != 3 || !approxEqual(floatsOf(&reply.Tensors[0]), []float32{1}) || !approxEqual(floatsOf(&reply.Tensors[2]), []float32{1, 2, 3}) {
		t.Fatalf("responses %v, tensors %v", resps, reply.Tensors)
	}
	if !resps[1].GetIsDead() || resps[0].GetIsDead() {
		t.Fatalf("deadness %v %v", resps[0].GetIsDead(), resps[1].GetIsDead())
	}
	// A key that never comes fails the call at its deadline.
	short, cancel := context.WithTimeout(ctx, 50e6)
	defer cancel()
	if _, err := task.wc.FuseRecvTensor(short, 4, keys[:1], &reply); !errors.Is(err, rpc.ErrDeadlineExceeded) {
		t.Fatalf("fuse of a consumed key: %v", err)
	}
	task.wc.CleanupGraph(ctx, 4)
}
