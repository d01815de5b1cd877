package eager

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A capture is one file of a testdata directory: NNNN-<what>.pb, in the
// order the ps saw it.
type capture struct {
	name string // <what>
	data []byte
}

func readCaptures(t *testing.T, dir string) []capture {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.pb"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in testdata/%s: %v", dir, err)
	}
	sort.Strings(files)
	out := make([]capture, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".pb")
		out[i] = capture{name: base[strings.IndexByte(base, '-')+1:], data: b}
	}
	return out
}

func unmarshal[M proto.Message](t *testing.T, c capture, m M) M {
	t.Helper()
	if err := proto.Unmarshal(c.data, m); err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	return m
}

// remoteKey names a tensor the ps pulled from another task.
type remoteKey struct {
	step int64
	key  string
}

// TestReplayParameterServerStrategy replays what a TensorFlow 2.21
// ClusterCoordinator and its worker sent a ps in two steps of a custom
// training loop (testdata/ps_custom_loop, see its README): the eager
// requests in their order, the tensors the ps pulled from the worker
// (gradients) answered from the capture. Every response, and every tensor
// the worker and the coordinator then pulled from the ps (variable values
// before and after each step), must be what they were in the captured run,
// whose losses matched TensorFlow's own ps.
func TestReplayParameterServerStrategy(t *testing.T) {
	caps := readCaptures(t, "ps_custom_loop")
	pulled := make(map[remoteKey]*tfpb.TensorProto)
	for _, c := range caps {
		if step, ok := strings.CutPrefix(c.name, "RemoteRecv-"); ok {
			n, err := strconv.ParseInt(step, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			nt := unmarshal(t, c, &tfpb.NamedTensorProto{})
			pulled[remoteKey{n, nt.GetName()}] = nt.GetTensor()
		}
	}
	env := &ops.Env{Task: "/job:ps/replica:0/task:0", Rendezvous: rendezvous.New(), Vars: ops.NewVariables()}
	env.RemoteRecv = func(_ context.Context, task string, step int64, key string) (wire.Tensor, error) {
		p := pulled[remoteKey{step, key}]
		if p == nil {
			t.Errorf("the ps pulled %q of step %d from %s, which the capture lacks", key, step, task)
			return wire.Tensor{}, context.Canceled
		}
		return tensor.FromProto(p)
	}
	var devices []*tfpb.DeviceAttributes
	for _, c := range caps {
		if c.name == "CreateContext-resp" {
			devices = unmarshal(t, c, &tfpb.CreateContextResponse{}).GetDeviceAttributes()
		}
	}
	s := newTestService(t, Options{Env: env, Devices: devices})
	ctx := context.Background()
	// The replayed responses no captured one has matched yet, by method:
	// concurrent requests answer in any order.
	pending := make(map[string][]proto.Message)
	used := make(map[int]bool)
	for i, c := range caps {
		switch c.name {
		case "CreateContext-req":
			answered[*tfpb.CreateContextResponse](t, i, pending, "CreateContext")(s.CreateContext(ctx, unmarshal(t, c, &tfpb.CreateContextRequest{})))
		case "Enqueue-req":
			answered[*tfpb.EnqueueResponse](t, i, pending, "Enqueue")(s.Enqueue(ctx, unmarshal(t, c, &tfpb.EnqueueRequest{})))
		case "RunComponentFunction-req":
			answered[*tfpb.RunComponentFunctionResponse](t, i, pending, "RunComponentFunction")(s.RunComponentFunction(ctx, unmarshal(t, c, &tfpb.RunComponentFunctionRequest{})))
		case "KeepAlive-req":
			answered[*tfpb.KeepAliveResponse](t, i, pending, "KeepAlive")(s.KeepAlive(ctx, unmarshal(t, c, &tfpb.KeepAliveRequest{})))
		case "CreateContext-resp", "Enqueue-resp", "RunComponentFunction-resp", "KeepAlive-resp":
			method := strings.TrimSuffix(c.name, "-resp")
			if !matchPending(t, pending, method, c) {
				t.Fatalf("capture %d (%s): no replayed %s answered\n%v", i+1, c.name, method, prototext.Format(unmarshal(t, c, pending[method][0].ProtoReflect().New().Interface())))
			}
		case "RecvTensor-req":
			replayRecvTensor(t, env, unmarshal(t, c, &tfpb.RecvTensorRequest{}), caps, i, used)
		}
	}
	if n := s.Contexts(); n != 1 {
		t.Fatalf("%d contexts after the replay, want 1", n)
	}
}

// answered returns what keeps a replayed request's response among those
// the captured responses of its method must match.
func answered[M proto.Message](t *testing.T, i int, pending map[string][]proto.Message, method string) func(M, error) {
	return func(got M, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("capture %d: %v", i+1, err)
		}
		pending[method] = append(pending[method], got)
	}
}

// matchPending removes from pending the replayed response of method that
// equals capture c, and reports whether there was one.
func matchPending(t *testing.T, pending map[string][]proto.Message, method string, c capture) bool {
	t.Helper()
	ms := pending[method]
	if len(ms) == 0 {
		t.Fatalf("%s: a response without its request", c.name)
	}
	exp := unmarshal(t, c, ms[0].ProtoReflect().New().Interface())
	for k, m := range ms {
		if proto.Equal(exp, m) {
			pending[method] = append(ms[:k:k], ms[k+1:]...)
			return true
		}
	}
	return false
}

// replayRecvTensor takes the tensor req asks for from the ps's rendezvous,
// as the worker's or coordinator's RecvTensor did, and checks it against
// one of the responses captured shortly after req (concurrent pulls answer
// in any order), which it marks used.
func replayRecvTensor(t *testing.T, env *ops.Env, req *tfpb.RecvTensorRequest, caps []capture, i int, used map[int]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, _, err := env.Rendezvous.Recv(ctx, req.GetStepId(), req.GetRendezvousKey())
	if err != nil {
		t.Fatalf("capture %d: RecvTensor %q of step %d: %v", i+1, req.GetRendezvousKey(), req.GetStepId(), err)
	}
	defer got.Buf.Release()
	p, err := tensor.ToProto(&got)
	if err != nil {
		t.Fatal(err)
	}
	for j := i + 1; j < len(caps) && j <= i+recvWindow; j++ {
		if caps[j].name != "RecvTensor-resp" || used[j] {
			continue
		}
		if exp := unmarshal(t, caps[j], &tfpb.RecvTensorResponse{}); proto.Equal(exp.GetTensor(), p) {
			used[j] = true
			return
		}
	}
	t.Fatalf("capture %d: RecvTensor %q: the replay's tensor\n%v\nis none of the captured run's next responses", i+1, req.GetRendezvousKey(), prototext.Format(p))
}

// recvWindow is how far after its request a RecvTensor's response may be
// captured.
const recvWindow = 12
