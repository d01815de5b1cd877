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
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// testTask is a Worker served over starwire and gRPC on loopback.
type testTask struct {
	w      *Worker
	addr   string
	client *rpc.Client
	wc     *WorkerClient
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
	tr := &rpc.TCP{}
	l, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	client := rpc.NewClient(l.Addr().String(), rpc.ClientOptions{Name: w.Task()})
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
	return &testTask{w: w, addr: l.Addr().String(), client: client, wc: NewWorkerClient(client), grpc: tfpb.NewWorkerServiceClient(cc), conn: cc}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Graph building.

func nodeDef(name, op string, inputs []string, attrs map[string]*tfpb.AttrValue) *tfpb.NodeDef {
	return &tfpb.NodeDef{Name: name, Op: op, Input: inputs, Attr: attrs}
}

func in(names ...string) []string { return names }

func attrs(kv ...any) map[string]*tfpb.AttrValue {
	m := make(map[string]*tfpb.AttrValue)
	for i := 0; i < len(kv); i += 2 {
		var a *tfpb.AttrValue
		switch v := kv[i+1].(type) {
		case wire.DataType:
			a = typeAttr(v)
		case bool:
			a = boolAttr(v)
		case int:
			a = intAttr(int64(v))
		case int64:
			a = intAttr(v)
		case string:
			a = stringAttr(v)
		case []int64:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_Shape{Shape: ShapeToProto(v)}}
		case []wire.DataType:
			l := &tfpb.AttrValue_ListValue{}
			for _, d := range v {
				l.Type = append(l.Type, tfpb.DataType(d))
			}
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: l}}
		case *tfpb.TensorProto:
			a = &tfpb.AttrValue{Value: &tfpb.AttrValue_Tensor{Tensor: v}}
		default:
			panic("attrs: unsupported value")
		}
		m[kv[i].(string)] = a
	}
	return m
}

func constF32(name string, shape []int64, vals ...float32) *tfpb.NodeDef {
	return nodeDef(name, "Const", nil, attrs("dtype", wire.DTFloat, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: ShapeToProto(shape), FloatVal: vals}))
}

func constI64(name string, shape []int64, vals ...int64) *tfpb.NodeDef {
	return nodeDef(name, "Const", nil, attrs("dtype", wire.DTInt64, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT64, TensorShape: ShapeToProto(shape), Int64Val: vals}))
}

func constI32(name string, shape []int64, vals ...int32) *tfpb.NodeDef {
	return nodeDef(name, "Const", nil, attrs("dtype", wire.DTInt32, "value",
		&tfpb.TensorProto{Dtype: tfpb.DataType_DT_INT32, TensorShape: ShapeToProto(shape), IntVal: vals}))
}

func constStr(name string, shape []int64, vals ...string) *tfpb.NodeDef {
	p := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: ShapeToProto(shape)}
	for _, v := range vals {
		p.StringVal = append(p.StringVal, []byte(v))
	}
	return nodeDef(name, "Const", nil, attrs("dtype", wire.DTString, "value", p))
}

// clientDevice is the device of the RunGraph caller in client-terminated
// keys, as TensorFlow's master names it.
const clientDevice = "/job:localhost/replica:0/task:0/device:CPU:0"

// feedNode is a client-terminated _Recv; feedKey is the key to send.
func feedNode(name, tensor string, dt wire.DataType, dst string) *tfpb.NodeDef {
	return nodeDef(name, "_Recv", nil, attrs("tensor_type", dt, "tensor_name", tensor, "send_device", clientDevice,
		"send_device_incarnation", int64(1), "recv_device", dst, "client_terminated", true))
}

func feedKey(tensor, dst string) string { return CreateKey(clientDevice, 1, dst, tensor, FrameIter{}) }

// fetchNode is a client-terminated _Send; fetchKey is the recv_key.
func fetchNode(name, input, tensor string, dt wire.DataType, src string, inc uint64) *tfpb.NodeDef {
	return nodeDef(name, "_Send", in(input), attrs("T", dt, "tensor_name", tensor, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", clientDevice, "client_terminated", true))
}

func fetchKey(tensor, src string, inc uint64) string {
	return CreateKey(src, inc, clientDevice, tensor, FrameIter{})
}

// sendNode and recvNode move a tensor between two tasks' partitions.
func sendNode(name, input, tensor string, dt wire.DataType, src string, inc uint64, dst string) *tfpb.NodeDef {
	return nodeDef(name, "_Send", in(input), attrs("T", dt, "tensor_name", tensor, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", dst))
}

func recvNode(name, tensor string, dt wire.DataType, src string, inc uint64, dst string) *tfpb.NodeDef {
	return nodeDef(name, "_Recv", nil, attrs("tensor_type", dt, "tensor_name", tensor, "send_device", src,
		"send_device_incarnation", int64(inc), "recv_device", dst))
}

func graphDef(nodes ...*tfpb.NodeDef) *tfpb.GraphDef { return &tfpb.GraphDef{Node: nodes} }

// f32 returns a float tensor for a test, which releases it.
func f32(shape []int64, vals ...float32) wire.Tensor { return tensorOf(wire.DTFloat, shape, vals) }

// i64 returns an int64 tensor for a test, which releases it.
func i64(shape []int64, vals ...int64) wire.Tensor { return tensorOf(wire.DTInt64, shape, vals) }

// tensorOf returns a tensor of dt, whose elements are of type T, holding
// vals.
func tensorOf[T Elem](dt wire.DataType, shape []int64, vals []T) wire.Tensor {
	t, err := NewTensor(dt, shape)
	if err != nil {
		panic(err)
	}
	copy(View[T](t.Data), vals)
	return t
}

func floatsOf(t *wire.Tensor) []float32 { return append([]float32(nil), View[float32](t.Data)...) }

func approxEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		d := a[i] - b[i]
		if d < -1e-4 || d > 1e-4 {
			return false
		}
	}
	return true
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

// waitFor polls cond for up to five seconds and fails the test if it never
// holds.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
