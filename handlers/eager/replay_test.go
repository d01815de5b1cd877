package eager

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
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
// (gradients) answered from the capture once the capture says the worker
// sent them. Every response, and every tensor the worker and the
// coordinator pulled from the ps (variable values before and after each
// step), must be what they were in the captured run, whose losses matched
// TensorFlow's own ps.
func TestReplayParameterServerStrategy(t *testing.T) {
	caps := readCaptures(t, "ps_custom_loop")
	r := newReplay(t, caps)
	s := r.s
	ctx := t.Context()
	for i, c := range caps {
		switch c.name {
		case "CreateContext-req":
			answered[*tfpb.CreateContextResponse](t, i, r.pending, "CreateContext")(s.CreateContext(ctx, unmarshal(t, c, &tfpb.CreateContextRequest{})))
		case "Enqueue-req":
			answered[*tfpb.EnqueueResponse](t, i, r.pending, "Enqueue")(s.Enqueue(ctx, unmarshal(t, c, &tfpb.EnqueueRequest{})))
		case "KeepAlive-req":
			answered[*tfpb.KeepAliveResponse](t, i, r.pending, "KeepAlive")(s.KeepAlive(ctx, unmarshal(t, c, &tfpb.KeepAliveRequest{})))
		case "RunComponentFunction-req":
			// It runs until the worker's tensors arrive, as on the ps.
			req := unmarshal(t, c, &tfpb.RunComponentFunctionRequest{})
			r.running++
			go func() {
				resp, err := s.RunComponentFunction(ctx, req)
				r.done <- funcResult{i, resp, err}
			}()
		case "CreateContext-resp", "Enqueue-resp", "KeepAlive-resp", "RunComponentFunction-resp":
			r.match(i, c)
		case "RecvTensor-req":
			replayRecvTensor(t, r.env, unmarshal(t, c, &tfpb.RecvTensorRequest{}), caps, i, r.used)
		default:
			if _, ok := strings.CutPrefix(c.name, "RemoteRecv-"); ok {
				close(r.gates[i])
			}
		}
	}
	if r.running != 0 {
		t.Fatalf("%d component functions still running after the replay", r.running)
	}
	if n := s.Contexts(); n != 1 {
		t.Fatalf("%d contexts after the replay, want 1", n)
	}
}

// A replay is the state of TestReplayParameterServerStrategy.
type replay struct {
	t   *testing.T
	s   *Service
	env *ops.Env
	// pending holds the replayed responses no captured one has matched
	// yet, by method: concurrent requests answer in any order.
	pending map[string][]proto.Message
	used    map[int]bool // RecvTensor responses matched
	// gates[i] is closed when the replay reaches capture i, a tensor the
	// ps pulled from the worker: the worker had sent it by then.
	gates   map[int]chan struct{}
	running int // component functions not yet answered
	done    chan funcResult
}

type funcResult struct {
	i    int // the request's capture
	resp *tfpb.RunComponentFunctionResponse
	err  error
}

func newReplay(t *testing.T, caps []capture) *replay {
	r := &replay{t: t, pending: make(map[string][]proto.Message), used: make(map[int]bool),
		gates: make(map[int]chan struct{}), done: make(chan funcResult, len(caps))}
	type pull struct {
		p    *tfpb.TensorProto
		gate chan struct{}
	}
	pulls := make(map[remoteKey][]pull)
	var devices []*tfpb.DeviceAttributes
	for i, c := range caps {
		if step, ok := strings.CutPrefix(c.name, "RemoteRecv-"); ok {
			n, err := strconv.ParseInt(step, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			nt := unmarshal(t, c, &tfpb.NamedTensorProto{})
			r.gates[i] = make(chan struct{})
			k := remoteKey{n, nt.GetName()}
			pulls[k] = append(pulls[k], pull{nt.GetTensor(), r.gates[i]})
		}
		if c.name == "CreateContext-resp" {
			devices = unmarshal(t, c, &tfpb.CreateContextResponse{}).GetDeviceAttributes()
		}
	}
	var mu sync.Mutex
	r.env = &ops.Env{Task: "/job:ps/replica:0/task:0", Rendezvous: rendezvous.New(), Vars: ops.NewVariables()}
	r.env.RemoteRecv = func(ctx context.Context, task string, step int64, key string) (wire.Tensor, error) {
		mu.Lock()
		ps := pulls[remoteKey{step, key}]
		if len(ps) > 0 {
			pulls[remoteKey{step, key}] = ps[1:]
		}
		mu.Unlock()
		if len(ps) == 0 {
			t.Errorf("the ps pulled %q of step %d from %s, which the capture lacks", key, step, task)
			return wire.Tensor{}, context.Canceled
		}
		select {
		case <-ps[0].gate:
		case <-ctx.Done():
			return wire.Tensor{}, ctx.Err()
		}
		return tensor.FromProto(ps[0].p)
	}
	r.s = newTestService(t, Options{Env: r.env, Devices: devices})
	return r
}

// match checks captured response i against a replayed one of its method,
// waiting for running component functions to answer when none matches.
func (r *replay) match(i int, c capture) {
	t := r.t
	t.Helper()
	method := strings.TrimSuffix(c.name, "-resp")
	for !matchPending(t, r.pending, method, c) {
		if method != "RunComponentFunction" || r.running == 0 {
			t.Fatalf("capture %d (%s): no replayed %s answered it", i+1, c.name, method)
		}
		select {
		case res := <-r.done:
			r.running--
			answered[*tfpb.RunComponentFunctionResponse](t, res.i, r.pending, "RunComponentFunction")(res.resp, res.err)
		case <-time.After(10 * time.Second):
			t.Fatalf("capture %d: no component function answered within 10 s", i+1)
		}
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
	for k, m := range pending[method] {
		exp := unmarshal(t, c, m.ProtoReflect().New().Interface())
		if proto.Equal(exp, m) {
			pending[method] = append(pending[method][:k:k], pending[method][k+1:]...)
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
