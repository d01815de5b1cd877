package handlers

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// transport calls one WorkerService method with protobufs, over starwire
// or over gRPC, so that each test below runs on both.
type transport struct {
	name string
	call func(ctx context.Context, m rpc.Method, req, resp proto.Message) error
	code func(err error) wire.Code
}

func transports(task *testTask) []transport {
	return []transport{
		{"starwire", task.client.CallProto, status.CodeOf},
		{"grpc", func(ctx context.Context, m rpc.Method, req, resp proto.Message) error {
			return task.grpcConn().Invoke(ctx, "/tensorflow.WorkerService/"+m.Name, req, resp)
		}, grpcCode},
	}
}

func TestEveryMethodOnBothTransports(t *testing.T) {
	task := startTask(t, Options{Job: "ps", Task: 1, Incarnation: 0x55, MemoryLimit: 1 << 30})
	ctx := testCtx(t)
	for _, tr := range transports(task) {
		t.Run(tr.name, func(t *testing.T) {
			// GetStatus reports the device.
			st := new(tfpb.GetStatusResponse)
			if err := tr.call(ctx, MethodGetStatus, &tfpb.GetStatusRequest{}, st); err != nil {
				t.Fatal(err)
			}
			d := st.GetDeviceAttributes()
			if len(d) != 1 || d[0].GetName() != "/job:ps/replica:0/task:1/device:CPU:0" || d[0].GetDeviceType() != "CPU" ||
				d[0].GetIncarnation() != 0x55 || d[0].GetMemoryLimit() != 1<<30 {
				t.Fatalf("GetStatus = %v", st)
			}

			// Sessions: a graph registered under an unknown session is refused.
			sess := "sess-" + tr.name
			reg := &tfpb.RegisterGraphRequest{SessionHandle: sess, CreateWorkerSessionCalled: true, GraphDef: GraphDef(ConstF32("c", nil, 3))}
			if err := tr.call(ctx, MethodRegisterGraph, reg, new(tfpb.RegisterGraphResponse)); tr.code(err) != wire.Aborted {
				t.Fatalf("RegisterGraph before CreateWorkerSession: %v", err)
			}
			if err := tr.call(ctx, MethodCreateWorkerSession, &tfpb.CreateWorkerSessionRequest{SessionHandle: sess}, new(tfpb.CreateWorkerSessionResponse)); err != nil {
				t.Fatal(err)
			}
			rg := new(tfpb.RegisterGraphResponse)
			if err := tr.call(ctx, MethodRegisterGraph, reg, rg); err != nil || rg.GetGraphHandle() == "" {
				t.Fatalf("RegisterGraph: %v %v", rg, err)
			}
			// RunGraph with a named fetch, tensors in protobufs: the
			// starwire server accepts them in place of segments.
			run := &tfpb.RunGraphRequest{SessionHandle: sess, CreateWorkerSessionCalled: true, GraphHandle: rg.GraphHandle, StepId: 3, RecvKey: []string{"c"}}
			if tr.name == "grpc" {
				rr := new(tfpb.RunGraphResponse)
				if err := tr.call(ctx, MethodRunGraph, run, rr); err != nil || len(rr.GetRecv()) != 1 || rr.Recv[0].GetTensor().GetTensorContent() == nil {
					t.Fatalf("RunGraph: %v %v", rr, err)
				}
			} else {
				var out Fetched
				if err := task.star.RunGraph(ctx, run, nil, &out); err != nil || !ApproxEqual(Floats(&out.Tensors[0]), []float32{3}) {
					t.Fatalf("RunGraph: %v %v", out.Tensors, err)
				}
				out.Release()
			}
			if err := tr.call(ctx, MethodCleanupGraph, &tfpb.CleanupGraphRequest{StepId: 3}, new(tfpb.CleanupGraphResponse)); err != nil {
				t.Fatal(err)
			}
			if err := tr.call(ctx, MethodDeregisterGraph, &tfpb.DeregisterGraphRequest{GraphHandle: rg.GraphHandle}, new(tfpb.DeregisterGraphResponse)); err != nil {
				t.Fatal(err)
			}
			if err := tr.call(ctx, MethodDeregisterGraph, &tfpb.DeregisterGraphRequest{GraphHandle: rg.GraphHandle}, new(tfpb.DeregisterGraphResponse)); tr.code(err) != wire.InvalidArgument {
				t.Fatalf("second DeregisterGraph: %v", err)
			}
			if err := tr.call(ctx, MethodRunGraph, run, new(tfpb.RunGraphResponse)); tr.code(err) != wire.Aborted {
				t.Fatalf("RunGraph of a deregistered graph: %v", err)
			}
			if err := tr.call(ctx, MethodRegisterGraph, reg, rg); err != nil {
				t.Fatal(err)
			}
			if err := tr.call(ctx, MethodDeleteWorkerSession, &tfpb.DeleteWorkerSessionRequest{SessionHandle: sess}, new(tfpb.DeleteWorkerSessionResponse)); err != nil {
				t.Fatal(err)
			}
			run.GraphHandle = rg.GraphHandle
			if err := tr.call(ctx, MethodRunGraph, run, new(tfpb.RunGraphResponse)); tr.code(err) != wire.Aborted {
				t.Fatalf("RunGraph after DeleteWorkerSession: %v", err)
			}
			if err := tr.call(ctx, MethodCleanupAll, &tfpb.CleanupAllRequest{Container: []string{"x"}}, new(tfpb.CleanupAllResponse)); err != nil {
				t.Fatal(err)
			}

			// RecvTensor.
			key := rendezvous.CreateKey(task.w.Device(), 0x55, "/job:worker/replica:0/task:0/device:CPU:0", "t-"+tr.name, rendezvous.FrameIter{})
			step := int64(8 + len(tr.name))
			task.w.rendezvous.Send(step, key, F32([]int64{2}, 4, 5))
			rt := new(tfpb.RecvTensorResponse)
			if tr.name == "grpc" {
				if err := tr.call(ctx, MethodRecvTensor, &tfpb.RecvTensorRequest{StepId: step, RendezvousKey: key}, rt); err != nil {
					t.Fatal(err)
				}
				x, err := tensor.FromProto(rt.GetTensor())
				if err != nil || !ApproxEqual(Floats(&x), []float32{4, 5}) {
					t.Fatalf("RecvTensor: %v %v", rt, err)
				}
				x.Buf.Release()
			} else {
				var out Fetched
				if err := task.star.RecvTensor(ctx, &tfpb.RecvTensorRequest{StepId: step, RendezvousKey: key}, &out); err != nil || !ApproxEqual(Floats(&out.Tensors[0]), []float32{4, 5}) {
					t.Fatalf("RecvTensor: %v", err)
				}
				out.Release()
			}
			task.w.rendezvous.Cleanup(step, errStepCleaned)

			// Logging records the steps run while it is on.
			if err := tr.call(ctx, MethodLogging, &tfpb.LoggingRequest{EnableRpcLogging: true}, new(tfpb.LoggingResponse)); err != nil {
				t.Fatal(err)
			}
			g := new(tfpb.RegisterGraphResponse)
			tr.call(ctx, MethodRegisterGraph, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(ConstF32("c", nil, 1))}, g)
			logged := int64(20 + len(tr.name))
			if err := tr.call(ctx, MethodRunGraph, &tfpb.RunGraphRequest{GraphHandle: g.GraphHandle, StepId: logged}, new(tfpb.RunGraphResponse)); err != nil {
				t.Fatal(err)
			}
			lr := new(tfpb.LoggingResponse)
			if err := tr.call(ctx, MethodLogging, &tfpb.LoggingRequest{DisableRpcLogging: true, FetchStepId: []int64{logged}}, lr); err != nil {
				t.Fatal(err)
			}
			if len(lr.GetStep()) != 1 || lr.Step[0].GetStepId() != logged || lr.Step[0].GetStepStats().GetDevStats()[0].GetNodeStats()[0].GetNodeName() != "c" {
				t.Fatalf("Logging = %v", lr)
			}
			// Tracing records for a while; a zero duration is refused.
			if err := tr.call(ctx, MethodTracing, &tfpb.TracingRequest{Options: &tfpb.TraceOpts{Duration: 0.001}}, new(tfpb.TracingResponse)); err != nil {
				t.Fatal(err)
			}
			if err := tr.call(ctx, MethodTracing, &tfpb.TracingRequest{}, new(tfpb.TracingResponse)); tr.code(err) != wire.InvalidArgument {
				t.Fatalf("Tracing without a duration: %v", err)
			}

			// RecvBuf is refused cleanly.
			if err := tr.call(ctx, MethodRecvBuf, &tfpb.RecvBufRequest{BufRendezvousKey: "k"}, new(tfpb.RecvBufResponse)); tr.code(err) != wire.Unimplemented {
				t.Fatalf("RecvBuf: %v", err)
			}
			// GetStepSequence counts per graph key.
			graphKey := int64(len(tr.name))
			for want := int64(0); want < 2; want++ {
				ss := new(tfpb.GetStepSequenceResponse)
				if err := tr.call(ctx, MethodGetStepSequence, &tfpb.GetStepSequenceRequest{GraphKey: []int64{graphKey}}, ss); err != nil {
					t.Fatal(err)
				}
				if s := ss.GetStepSequence(); len(s) != 1 || s[0].GetGraphKey() != graphKey || s[0].GetNextStepId() != want {
					t.Fatalf("GetStepSequence = %v", ss)
				}
			}
			if err := tr.call(ctx, MethodMarkRecvFinished, &tfpb.MarkRecvFinishedRequest{RequestId: 3}, new(tfpb.MarkRecvFinishedResponse)); err != nil {
				t.Fatal(err)
			}

			// CompleteGroup waits for every member; CompleteInstance finds the source.
			groupKey := int32(len(tr.name))
			devs := []string{"/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"}
			var wg sync.WaitGroup
			groups := make([]*tfpb.CompleteGroupResponse, 2)
			errs := make([]error, 2)
			for i, d := range devs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					groups[i] = new(tfpb.CompleteGroupResponse)
					errs[i] = tr.call(ctx, MethodCompleteGroup, &tfpb.CompleteGroupRequest{GroupKey: groupKey, GroupSize: 2, DeviceType: "CPU",
						DeviceAttributes: &tfpb.DeviceAttributes{Name: d}}, groups[i])
				}()
			}
			wg.Wait()
			for i := range errs {
				if errs[i] != nil || len(groups[i].GetDeviceAttributes()) != 2 || groups[i].GetNumTasks() != 2 {
					t.Fatalf("CompleteGroup %d: %v %v", i, groups[i], errs[i])
				}
			}
			insts := make([]*tfpb.CompleteInstanceResponse, 2)
			for i, d := range devs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					insts[i] = new(tfpb.CompleteInstanceResponse)
					errs[i] = tr.call(ctx, MethodCompleteInstance, &tfpb.CompleteInstanceRequest{GroupKey: groupKey, GroupSize: 2, InstanceKey: 9,
						Device: d, IsSource: i == 1}, insts[i])
				}()
			}
			wg.Wait()
			for i := range errs {
				if errs[i] != nil || insts[i].GetSourceRank() != 1 || insts[i].GetInstanceKey() != 9 {
					t.Fatalf("CompleteInstance %d: %v %v", i, insts[i], errs[i])
				}
			}
			// A lone member waits until its deadline.
			short, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
			defer cancel()
			err := tr.call(short, MethodCompleteGroup, &tfpb.CompleteGroupRequest{GroupKey: 100 + groupKey, GroupSize: 2, DeviceType: "CPU",
				DeviceAttributes: &tfpb.DeviceAttributes{Name: devs[0]}}, new(tfpb.CompleteGroupResponse))
			if tr.code(err) != wire.DeadlineExceeded {
				t.Fatalf("incomplete group: %v", err)
			}
		})
	}
}

// TestMalformedRequests sends undecodable metadata to methods and checks
// they are refused with InvalidArgument and the worker keeps serving.
func TestMalformedRequests(t *testing.T) {
	task := startTask(t, Options{Job: "ps"})
	ctx := testCtx(t)
	var reply rpc.Reply
	defer reply.Release()
	for _, m := range []rpc.Method{MethodRecvTensor, MethodFuseRecvTensor, MethodRunGraph, MethodRegisterGraph, MethodGetStatus} {
		err := task.client.Call(ctx, m, &rpc.Request{Meta: []byte{0xff, 0xff, 0xff}}, &reply)
		if !errors.Is(err, status.ErrInvalidArgument) {
			t.Errorf("%s with a garbage request: %v", m.Name, err)
		}
		reply.Release()
	}
	// The worker still serves.
	if _, err := task.star.GetStatus(ctx); err != nil {
		t.Fatal(err)
	}
}
