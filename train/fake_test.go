package train

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// fakeCluster makes the Callers of tasks that run no graphs: a
// partition's fetches are answered with a loss of 0.5 each.
type fakeCluster struct {
	// killNext, when set, dies at its next RunGraph.
	killNext atomic.Pointer[fakeTask]
	// restartNext, when set, restarts at its next RunGraph, which fails
	// as the connection broken by the restart: the same Caller reaches
	// the new incarnation at once, which has none of the graphs
	// registered before.
	restartNext atomic.Pointer[fakeTask]

	mu      sync.Mutex
	handles int
}

func (c *fakeCluster) task(name string, inc uint64) *fakeTask {
	f := &fakeTask{c: c, name: name}
	f.inc.Store(inc)
	return f
}

// fakeTask is a Caller of one incarnation of a task; dead, it fails every
// call at once.
type fakeTask struct {
	c            *fakeCluster
	name         string
	inc          atomic.Uint64
	dead, closed atomic.Bool
	// gone is the last graph handle number registered before the task
	// last restarted.
	gone atomic.Int64
}

func (f *fakeTask) check() error {
	if f.closed.Load() {
		return status.Errorf(wire.Unavailable, "client closed")
	}
	if f.dead.Load() {
		return status.Errorf(wire.Unavailable, "connection reset by peer")
	}
	return nil
}

func (f *fakeTask) Task() string { return f.name }

// Call carries no peer calls: the fake tasks run no graphs.
func (f *fakeTask) Call(context.Context, rpc.Method, *rpc.Request, *rpc.Reply) error {
	return status.Errorf(wire.Unimplemented, "fake task %s makes no peer calls", f.name)
}
func (f *fakeTask) GetStatus(context.Context) (*tfpb.GetStatusResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return &tfpb.GetStatusResponse{DeviceAttributes: []*tfpb.DeviceAttributes{{Name: f.name + "/device:CPU:0", Incarnation: f.inc.Load()}}}, nil
}
func (f *fakeTask) CreateWorkerSession(context.Context, *tfpb.CreateWorkerSessionRequest) error {
	return f.check()
}
func (f *fakeTask) DeleteWorkerSession(context.Context, *tfpb.DeleteWorkerSessionRequest) error {
	return f.check()
}
func (f *fakeTask) RegisterGraph(context.Context, *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	f.c.handles++
	return &tfpb.RegisterGraphResponse{GraphHandle: "g" + strconv.Itoa(f.c.handles)}, nil
}
func (f *fakeTask) DeregisterGraph(context.Context, *tfpb.DeregisterGraphRequest) error {
	return f.check()
}
func (f *fakeTask) RunGraph(_ context.Context, req *tfpb.RunGraphRequest, _ []driver.Feed, out *driver.Fetched) error {
	if f.c.killNext.CompareAndSwap(f, nil) {
		f.dead.Store(true)
	}
	if err := f.check(); err != nil {
		return err
	}
	if f.c.restartNext.CompareAndSwap(f, nil) {
		f.c.mu.Lock()
		f.gone.Store(int64(f.c.handles))
		f.c.mu.Unlock()
		f.inc.Add(1)
		return status.Errorf(wire.Unavailable, "connection reset by peer")
	}
	if n, _ := strconv.ParseInt(strings.TrimPrefix(req.GraphHandle, "g"), 10, 64); n <= f.gone.Load() {
		return status.Errorf(wire.Aborted, "graph handle %s not found", req.GraphHandle)
	}
	if len(req.RecvKey) > 0 {
		out.Keys = append(out.Keys[:0], req.RecvKey...)
		out.Tensors = out.Tensors[:0]
		for range req.RecvKey {
			out.Tensors = append(out.Tensors, wire.Tensor{DType: wire.DTFloat, Data: tensor.Bytes([]float32{0.5})})
		}
	}
	return nil
}
func (f *fakeTask) CleanupGraph(context.Context, *tfpb.CleanupGraphRequest) error { return f.check() }
func (f *fakeTask) RecvTensor(context.Context, *tfpb.RecvTensorRequest, *driver.Fetched) error {
	return f.check()
}
func (f *fakeTask) Stats() driver.Stats { return driver.Stats{} }
func (f *fakeTask) Close() error {
	f.closed.Store(true)
	return nil
}

// fakeModel registers one empty graph per parameter server to initialize,
// and per live replica one on worker and one on parameter server 0 for
// its steps; a step fetches the loss from the worker's.
type fakeModel struct {
	s             *Session
	init          []driver.Graph
	worker, ps    []driver.Graph // by replica
	builds, inits atomic.Int32
	// pace, when set, is how long each step's Next takes: the time a
	// batch takes to draw, outside the step gate.
	pace time.Duration
	// ran counts the steps each replica ran, by replica.
	ran [4]atomic.Int64
}

func (m *fakeModel) Build(ctx context.Context, t *Tasks) error {
	var init []driver.Graph
	for _, p := range t.PS {
		g, err := t.Register(ctx, p.Name, &tfpb.GraphDef{})
		if err != nil {
			return err
		}
		init = append(init, g)
	}
	worker, ps := make([]driver.Graph, len(t.Workers)), make([]driver.Graph, len(t.Workers))
	for r, w := range t.Workers {
		if !w.Live {
			continue
		}
		var err error
		if ps[r], err = t.Register(ctx, t.PS[0].Name, &tfpb.GraphDef{}); err != nil {
			return err
		}
		if worker[r], err = t.Register(ctx, w.Name, &tfpb.GraphDef{}); err != nil {
			return err
		}
	}
	m.init, m.worker, m.ps = init, worker, ps
	m.builds.Add(1)
	return nil
}

func (m *fakeModel) Initialize(ctx context.Context) error {
	parts := make([]driver.Partition, len(m.init))
	for i, g := range m.init {
		parts[i] = driver.Partition{Graph: g}
	}
	step := m.s.NextStepID()
	if err := m.s.Driver().RunPartitions(ctx, step, parts...); err != nil {
		return err
	}
	m.inits.Add(1)
	return m.s.Driver().CleanupStep(ctx, step, m.s.PSTasks()...)
}

func (m *fakeModel) Replica(r int) Replica { return &fakeReplica{m: m, r: r} }

type fakeReplica struct {
	m   *fakeModel
	r   int
	out driver.Fetched
}

func (r *fakeReplica) Next(context.Context) error {
	if r.m.pace > 0 {
		time.Sleep(r.m.pace)
	}
	return nil
}

func (r *fakeReplica) Step(ctx context.Context, on int, step int64) (float64, error) {
	err := r.m.s.Driver().RunPartitions(ctx, step,
		driver.Partition{Graph: r.m.worker[on], Fetches: []string{"loss"}, Out: &r.out},
		driver.Partition{Graph: r.m.ps[on]})
	var loss float64
	if err == nil {
		loss = float64(tensor.View[float32](r.out.Tensors[0].Data)[0])
		r.m.ran[r.r].Add(1)
	}
	r.out.Release()
	return loss, err
}

func (r *fakeReplica) Close() {}

// newFakeSession returns a session of steps steps per replica training a
// fakeModel over d.
func newFakeSession(d *driver.Driver, ps, workers, steps int) (*Session, *fakeModel) {
	m := &fakeModel{}
	s := NewSession(d, m, Options{PS: ps, Workers: workers, Steps: steps})
	m.s = s
	return s, m
}
