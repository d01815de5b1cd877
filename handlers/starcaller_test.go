package handlers

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A client is StarCaller or GRPCCaller, with the methods the tests use.
type client interface {
	Caller
	RunGraph(ctx context.Context, req *tfpb.RunGraphRequest, feeds []Feed, out *Fetched) error
	CleanupGraph(ctx context.Context, req *tfpb.CleanupGraphRequest) error
	Stats() Stats
}

// clients returns task's StarCaller and a GRPCCaller of it.
func clients(t *testing.T, task *testTask) map[string]client {
	t.Helper()
	g, err := DialGRPC(task.w.Task(), task.gaddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return map[string]client{"starwire": task.star, "grpc": g}
}

// TestRunGraphKeepsRequest: neither client's RunGraph changes the request
// it is given, whether it succeeds, fails, or comes back with the error in
// its body; a request with send entries of its own is refused.
func TestRunGraphKeepsRequest(t *testing.T) {
	task := startTask(t, Options{Job: "worker"})
	ctx := testCtx(t)
	reg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: feedGraph(task.w)})
	if err != nil {
		t.Fatal(err)
	}
	dev, inc := task.w.Device(), task.w.Incarnation()
	xKey, zKey := FeedKey("x:0", dev), FetchKey("z:0", dev, inc)
	good, bad := F32([]int64{1, 2}, 3, 4), F32([]int64{2, 3})
	defer good.Buf.Release()
	defer bad.Buf.Release()
	step := int64(0)
	for name, c := range clients(t, task) {
		t.Run(name, func(t *testing.T) {
			for _, tt := range []struct {
				name  string
				feed  wire.Tensor
				store bool
				want  wire.Code
			}{
				{"ok", good, false, wire.OK},
				{"bad feed", bad, false, wire.InvalidArgument},
				{"bad feed, error in the body", bad, true, wire.InvalidArgument},
			} {
				step++
				req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step, RecvKey: []string{zKey}, StoreErrorsInResponseBody: tt.store}
				before := proto.Clone(req)
				var out Fetched
				err := c.RunGraph(ctx, req, []Feed{{Key: xKey, Tensor: tt.feed}}, &out)
				if rpc.CodeOf(err) != tt.want {
					t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
				}
				if err == nil && (!slices.Equal(out.Keys, []string{zKey}) || !ApproxEqual(Floats(&out.Tensors[0]), []float32{11})) {
					t.Errorf("%s: fetched %v %v, want z = [11]", tt.name, out.Keys, out.Tensors)
				}
				out.Release()
				if !proto.Equal(req, before) {
					t.Errorf("%s: RunGraph changed its request:\n%v\nwas\n%v", tt.name, req, before)
				}
				c.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
			}
			req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 99, Send: []*tfpb.NamedTensorProto{{Name: xKey}}}
			var out Fetched
			if err := c.RunGraph(ctx, req, nil, &out); rpc.CodeOf(err) != wire.InvalidArgument {
				t.Errorf("RunGraph with send entries in the request: %v, want InvalidArgument", err)
			}
		})
	}
}

// TestPeerCallsOneEncoding: a worker's RecvTensor and FuseRecvTensor to a
// peer answer alike over both clients, in the one encoding the starwire
// server answers with: values, deadness and send times decode the same.
func TestPeerCallsOneEncoding(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	dst := "/job:worker/replica:0/task:0/device:CPU:0"
	key := func(name string) string {
		return rendezvous.CreateKey(task.w.Device(), task.w.Incarnation(), dst, name, rendezvous.FrameIter{})
	}
	step := int64(0)
	for name, c := range clients(t, task) {
		t.Run(name, func(t *testing.T) {
			step++
			task.w.rendezvous.Send(step, key("one"), F32([]int64{3}, 1, 2, 3))
			task.w.rendezvous.Send(step, key("alive"), F32([]int64{1, 2}, 4, 5))
			task.w.rendezvous.Send(step, key("dead"), wire.Tensor{DType: wire.DTFloat, Dead: true})
			defer task.w.rendezvous.Cleanup(step, errStepCleaned)
			calls := c.Stats().Calls

			var one wire.Tensor
			start, err := recvTensorInto(ctx, c, step, key("one"), &one)
			if err != nil || start == 0 || one.Dead || !ApproxEqual(Floats(&one), []float32{1, 2, 3}) {
				t.Fatalf("RecvTensor: %v%v dead %v, sent at %d, %v", one.Shape, one.Data, one.Dead, start, err)
			}
			one.Buf.Release()

			var meta, scratch []byte
			for _, k := range []string{key("alive"), key("dead")} {
				scratch = appendRecvTensorRequest(scratch[:0], step, k)
				meta = appendFused(meta, scratch)
			}
			var reply rpc.Reply
			defer reply.Release()
			if err := c.Call(ctx, MethodFuseRecvTensor, &rpc.Request{Meta: meta}, &reply); err != nil {
				t.Fatal(err)
			}
			if err := markDead(MethodFuseRecvTensor, &reply); err != nil || len(reply.Tensors) != 2 {
				t.Fatalf("FuseRecvTensor: %d tensors, %v", len(reply.Tensors), err)
			}
			alive, dead := reply.Tensors[0], reply.Tensors[1]
			if alive.Dead || !slices.Equal(alive.Shape, []int64{1, 2}) || !ApproxEqual(Floats(&alive), []float32{4, 5}) {
				t.Errorf("alive tensor: %v%v dead %v", alive.Shape, Floats(&alive), alive.Dead)
			}
			if !dead.Dead || dead.DType != wire.DTFloat || len(dead.Data) != 0 {
				t.Errorf("dead tensor: %+v", dead)
			}
			if got := c.Stats().Calls - calls; got < 2 {
				t.Errorf("%d calls counted, want at least 2", got)
			}
		})
	}
}

// TestAppendSends: the send entries appended to a request's encoding
// decode as its Send, and take the room sendsSize makes for them.
func TestAppendSends(t *testing.T) {
	feeds := []Feed{{Key: "a"}, {Key: string(make([]byte, 300))}, {Key: ""}}
	req := &tfpb.RunGraphRequest{GraphHandle: "g", StepId: 3, RecvKey: []string{"r"}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	n := len(b)
	b = appendSends(b, feeds)
	if got := len(b) - n; got != sendsSize(feeds) {
		t.Errorf("appended %d bytes, sendsSize says %d", got, sendsSize(feeds))
	}
	var got tfpb.RunGraphRequest
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetGraphHandle() != "g" || got.GetStepId() != 3 || len(got.GetSend()) != len(feeds) {
		t.Fatalf("decoded %v", &got)
	}
	for i, s := range got.GetSend() {
		if s.GetName() != feeds[i].Key || s.GetTensor() != nil {
			t.Errorf("send %d: %q with tensor %v, want %q and none", i, s.GetName(), s.GetTensor(), feeds[i].Key)
		}
	}
}
