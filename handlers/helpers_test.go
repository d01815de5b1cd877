package handlers

import (
	"context"
	"math"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/rpc/tcp"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// testTask is a Worker served over starwire and gRPC on loopback.
type testTask struct {
	w      *Worker
	addr   string
	gaddr  string // gRPC
	client *rpc.Client
	star   *StarCaller // owns client
	grpc   tfpb.WorkerServiceClient
	conn   *grpc.ClientConn
}

func (t *testTask) grpcConn() *grpc.ClientConn { return t.conn }

// startTask serves a worker for job/task; resolve, when set, finds other
// tasks for remote _Recv.
func startTask(t testing.TB, opts Options) *testTask {
	t.Helper()
	w, err := NewWorker(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := rpc.NewServer()
	w.Register(srv)
	tr := &tcp.Transport{}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Transport: &tcp.Transport{}, Name: w.Task()})
	t.Cleanup(func() { client.Close() })

	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// TensorFlow lifts gRPC's 4 MiB message limit; so do the tests.
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(math.MaxInt32), grpc.MaxSendMsgSize(math.MaxInt32))
	tfpb.RegisterWorkerServiceServer(gs, w.GRPCService())
	go gs.Serve(gl)
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(gl.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &testTask{w: w, addr: l.Addr().String(), gaddr: gl.Addr().String(), client: client, star: NewStarCaller(w.Task(), client), grpc: tfpb.NewWorkerServiceClient(cc), conn: cc}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// runLocal registers g on w and runs it once with named feeds, returning
// the fetched outputs (released by the test's cleanup).
func runLocal(t *testing.T, w *Worker, g *tfpb.GraphDef, feeds map[string]wire.Tensor, fetches ...string) ([]wire.Tensor, error) {
	t.Helper()
	reg, err := w.registerGraph(&tfpb.RegisterGraphRequest{GraphDef: g})
	if err != nil {
		return nil, err
	}
	req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 1, RecvKey: fetches}
	var ts []wire.Tensor
	for name, f := range feeds {
		req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: name})
		ts = append(ts, f)
	}
	_, out, err := w.runGraph(context.Background(), req, ts)
	for i := range ts {
		ts[i].Buf.Release()
	}
	w.rendezvous.Cleanup(1, errStepCleaned)
	t.Cleanup(func() {
		for i := range out {
			out[i].Buf.Release()
		}
	})
	return out, err
}

func newTestWorker(t *testing.T) *Worker {
	w, err := NewWorker(Options{Job: "ps", Task: 0, Incarnation: 7, CheckpointDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// grpcCode returns the status code of a gRPC error.
func grpcCode(err error) wire.Code {
	if err == nil {
		return wire.OK
	}
	st, ok := status.FromError(err)
	if !ok {
		return wire.Unknown
	}
	return wire.Code(st.Code())
}
