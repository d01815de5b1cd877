package handlers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
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
	key := rendezvous.CreateKey(w.Device(), w.Incarnation(), "/job:worker/replica:0/task:0/device:CPU:0", "emb/read:0", rendezvous.FrameIter{})
	meta, _ := proto.Marshal(&tfpb.RecvTensorRequest{StepId: 77, RendezvousKey: key, RequestId: 5})
	x := F32([]int64{64, 16})
	defer x.Buf.Release()
	in := &wire.Inbound{Meta: meta}
	resp := &rpc.Response{Meta: make([]byte, 0, 256), Tensors: make([]wire.Tensor, 0, 1)}
	ctx := context.Background()
	once := func() {
		if err := w.rendezvous.Send(77, key, tensor.Ref(x)); err != nil {
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
	if allocs > 0 && !raceEnabled {
		t.Fatalf("steady-state RecvTensor allocates %v times per call, want 0", allocs)
	}
	// The response decodes as a RecvTensorResponse with dtype and shape.
	once2 := func() *tfpb.RecvTensorResponse {
		w.rendezvous.Send(77, key, tensor.Ref(x))
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
	shape, _ := tensor.ShapeFromProto(m.GetTensor().GetTensorShape())
	if m.GetTensor().GetDtype() != tfpb.DataType_DT_FLOAT || !slices.Equal(shape, []int64{64, 16}) || m.GetSendStartMicros() == 0 || m.GetIsDead() || len(m.GetTensor().GetTensorContent()) != 0 {
		t.Fatalf("response %v", m)
	}
	w.rendezvous.Cleanup(77, errStepCleaned)
}

func BenchmarkRecvTensorHandler(b *testing.B) {
	w, _ := NewWorker(Options{Job: "ps", Incarnation: 1})
	key := rendezvous.CreateKey(w.Device(), 1, "/job:worker/replica:0/task:0/device:CPU:0", "t", rendezvous.FrameIter{})
	meta, _ := proto.Marshal(&tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: key})
	x := F32([]int64{1024})
	defer x.Buf.Release()
	in := &wire.Inbound{Meta: meta}
	resp := &rpc.Response{}
	b.ReportAllocs()
	b.SetBytes(int64(len(x.Data)))
	for b.Loop() {
		w.rendezvous.Send(1, key, tensor.Ref(x))
		w.handleRecvTensor(context.Background(), in, resp)
		resp.Tensors[0].Buf.Release()
		resp.Tensors, resp.Meta = resp.Tensors[:0], resp.Meta[:0]
	}
}

func TestRecvTensorChecksKey(t *testing.T) {
	task := startTask(t, Options{Job: "ps", Incarnation: 0x1234})
	ctx := testCtx(t)
	dst := "/job:worker/replica:0/task:0/device:CPU:0"
	var out Fetched
	defer out.Release()
	tests := []struct {
		name, key string
		code      error
		msg       string
	}{
		{"old incarnation", rendezvous.CreateKey(task.w.Device(), 0x1233, dst, "t", rendezvous.FrameIter{}), status.ErrAborted, "the task restarted"},
		{"other device", rendezvous.CreateKey("/job:ps/replica:0/task:1/device:CPU:0", 0x1234, dst, "t", rendezvous.FrameIter{}), status.ErrInvalidArgument, "is not sent from"},
		{"malformed", "not;a;key", status.ErrInvalidArgument, "malformed key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := task.star.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: tt.key}, &out)
			if !errors.Is(err, tt.code) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tt.code, tt.msg)
			}
			_, err = task.grpc.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: tt.key})
			if grpcCode(err) != status.CodeOf(tt.code) {
				t.Fatalf("over gRPC: %v", err)
			}
		})
	}
	// An unpadded incarnation is still this worker's.
	unpadded := task.w.Device() + ";1234;" + dst + ";t;0:0"
	task.w.rendezvous.Send(1, unpadded, F32([]int64{1}, 9))
	if err := task.star.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: 1, RendezvousKey: unpadded}, &out); err != nil {
		t.Fatalf("unpadded incarnation: %v", err)
	}
}

func TestFuseRecvTensor(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	dst := "/job:worker/replica:0/task:0/device:CPU:0"
	var keys []string
	for i, name := range []string{"a", "b", "c"} {
		k := rendezvous.CreateKey(task.w.Device(), task.w.Incarnation(), dst, name, rendezvous.FrameIter{})
		keys = append(keys, k)
		if name == "b" {
			// A dead tensor travels as is_dead with no data.
			task.w.rendezvous.Send(4, k, wire.Tensor{DType: wire.DTFloat, Dead: true})
			continue
		}
		task.w.rendezvous.Send(4, k, F32([]int64{int64(i + 1)}, 1, 2, 3))
	}
	var out Fetched
	defer out.Release()
	err := task.star.FuseRecvTensor(ctx, 4, keys, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Tensors) != 3 || !ApproxEqual(Floats(&out.Tensors[0]), []float32{1}) || !ApproxEqual(Floats(&out.Tensors[2]), []float32{1, 2, 3}) {
		t.Fatalf("responses for %v, tensors %v", out.Keys, out.Tensors)
	}
	if !out.Tensors[1].Dead || out.Tensors[0].Dead {
		t.Fatalf("deadness %v %v", out.Tensors[0].Dead, out.Tensors[1].Dead)
	}
	// A key that never comes fails the call at its deadline.
	short, cancel := context.WithTimeout(ctx, 50e6)
	defer cancel()
	if err := task.star.FuseRecvTensor(short, 4, keys[:1], &out); !errors.Is(err, status.ErrDeadlineExceeded) {
		t.Fatalf("fuse of a consumed key: %v", err)
	}
	task.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: 4})
}

// TestRecvTensorPullAllocs measures a worker pulling a tensor that is
// already in a peer's rendezvous, over a real loopback connection. Both
// ends run in this process, so AllocsPerRun counts the puller's request,
// the in-place decode and the landing of the bytes, the transport, and the
// serving worker's handler together.
//
// With RecvTensor registered as Register does (on a goroutine of its own,
// since it may wait), rpc's server allocates the goroutine's start once per
// call; served inline, which a tensor already in the rendezvous allows, the
// whole call allocates nothing.
func TestRecvTensorPullAllocs(t *testing.T) {
	task := startTask(t, Options{Job: "ps", Incarnation: 0xabc})
	srv := rpc.NewServer()
	srv.Register(MethodRecvTensor, task.w.handleRecvTensor, rpc.HandlerOptions{Inline: true})
	l, err := (&tcp.Transport{}).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	inline := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}})
	t.Cleanup(func() { inline.Close() })

	key := rendezvous.CreateKey(task.w.Device(), task.w.Incarnation(), "/job:worker/replica:0/task:0/device:CPU:0", "emb/read:0", rendezvous.FrameIter{})
	x := F32([]int64{64, 16})
	for i := range tensor.View[float32](x.Data) {
		tensor.View[float32](x.Data)[i] = float32(i)
	}
	defer x.Buf.Release()
	ctx := testCtx(t)
	into := make([]byte, len(x.Data))
	for _, tt := range []struct {
		name      string
		c         *rpc.Client
		into      []byte
		maxAllocs float64
	}{
		{"inline/pooled", inline, nil, 0},
		{"inline/into", inline, into, 0},
		{"registered/pooled", task.client, nil, 0},
		{"registered/into", task.client, into, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dst := wire.Tensor{Shape: make([]int64, 0, 4)}
			pull := func() {
				if err := task.w.rendezvous.Send(77, key, tensor.Ref(x)); err != nil {
					t.Fatal(err)
				}
				dst.Data = tt.into
				if _, err := recvTensorInto(ctx, tt.c, 77, key, &dst); err != nil {
					t.Fatal(err)
				}
				if dst.DType != wire.DTFloat || !slices.Equal(dst.Shape, x.Shape) || string(dst.Data) != string(x.Data) {
					t.Fatalf("pulled %v%v, %d bytes", dst.DType, dst.Shape, len(dst.Data))
				}
				if tt.into != nil && (dst.Buf != nil || !sameMemory(dst.Data, tt.into)) {
					t.Fatal("the tensor did not land in the destination")
				}
				dst.Buf.Release()
				dst.Buf = nil
			}
			pull()
			allocs := testing.AllocsPerRun(500, pull)
			t.Logf("allocations per steady-state RecvTensor, both ends: %v", allocs)
			if allocs > tt.maxAllocs && !raceEnabled {
				t.Fatalf("a steady-state RecvTensor allocates %v times, want at most %v", allocs, tt.maxAllocs)
			}
		})
	}
	task.w.rendezvous.Cleanup(77, errStepCleaned)
}

// replyOnly is a Caller that answers without consulting Reply.Alloc, as a
// Caller carrying RecvTensor over gRPC does: the tensor's bytes are in
// memory of its own, without a Buf.
type replyOnly struct {
	meta []byte
	t    wire.Tensor
}

func (r *replyOnly) Call(_ context.Context, _ rpc.Method, _ *rpc.Request, resp *rpc.Reply) error {
	resp.Release()
	resp.Meta, resp.Tensors = r.meta, []wire.Tensor{r.t}
	return nil
}

func TestRecvTensorIntoWithoutAlloc(t *testing.T) {
	x := F32([]int64{2, 2}, 1, 2, 3, 4)
	defer x.Buf.Release()
	view := x
	view.Buf = nil
	c := &replyOnly{meta: appendRecvTensorResponse(nil, &view, 42), t: view}
	ctx := context.Background()

	var dst wire.Tensor
	start, err := recvTensorInto(ctx, c, 1, "k", &dst)
	if err != nil || start != 42 || !slices.Equal(dst.Shape, []int64{2, 2}) || !ApproxEqual(Floats(&dst), []float32{1, 2, 3, 4}) {
		t.Fatalf("pulled %v%v, %v, %v", dst.Shape, dst.Data, start, err)
	}
	if dst.Buf != nil || !sameMemory(dst.Data, x.Data) {
		t.Fatal("aligned memory without a Buf was copied")
	}

	into := make([]float32, 4)
	dst = wire.Tensor{Data: tensor.Bytes(into)}
	if _, err := recvTensorInto(ctx, c, 1, "k", &dst); err != nil || !ApproxEqual(into, []float32{1, 2, 3, 4}) {
		t.Fatalf("into a destination: %v, %v", into, err)
	}

	small := make([]byte, 3)
	dst = wire.Tensor{Data: small}
	if _, err := recvTensorInto(ctx, c, 1, "k", &dst); err != nil || sameMemory(dst.Data, small) || len(dst.Data) != 16 {
		t.Fatalf("into a destination of the wrong size: %d bytes, %v", len(dst.Data), err)
	}

	dead := wire.Tensor{DType: wire.DTFloat, Shape: []int64{0}, Dead: true, Data: []byte{}}
	c = &replyOnly{meta: appendRecvTensorResponse(nil, &dead, 1), t: dead}
	dst = wire.Tensor{Shape: []int64{5}}
	if _, err := recvTensorInto(ctx, c, 1, "k", &dst); err != nil || !dst.Dead || len(dst.Shape) != 0 || dst.Data != nil || dst.DType != wire.DTFloat {
		t.Fatalf("dead tensor pulled as %+v, %v", dst, err)
	}

	c = &replyOnly{meta: []byte{0xff}, t: view}
	if _, err := recvTensorInto(ctx, c, 1, "k", &dst); !errors.Is(err, status.ErrDataLoss) {
		t.Fatalf("undecodable response: %v", err)
	}
}
