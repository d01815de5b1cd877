package drivertest

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Cluster makes the Callers of fake tasks, which share its graph
// handles. The zero Cluster answers every key a RunGraph fetches with a
// float 0.5.
type Cluster struct {
	// Fetch, when set, places the tensors fetched for keys in out, as a
	// RunGraph that fetches keys does.
	Fetch func(keys []string, out *handlers.Fetched)
	// DeadCleanup, when set, is called by a dead task's CleanupGraph
	// before it fails: a call to a peer that is gone, whose cancellation
	// has not come through yet, waits for what the test says.
	DeadCleanup func()

	killNext, restartNext atomic.Pointer[Task]

	mu      sync.Mutex
	handles int
}

// Task returns a Caller of incarnation inc of task name.
func (c *Cluster) Task(name string, inc uint64) *Task {
	f := &Task{c: c, name: name}
	f.inc.Store(inc)
	return f
}

// KillNext has f die at its next RunGraph.
func (c *Cluster) KillNext(f *Task) { c.killNext.Store(f) }

// RestartNext has f restart at its next RunGraph, which fails as the
// connection broken by the restart does: the same Caller reaches the new
// incarnation at once, which has none of the graphs registered before.
func (c *Cluster) RestartNext(f *Task) { c.restartNext.Store(f) }

// A Task is a Caller of one incarnation of a task. Dead, it fails every
// call at once, as a reset connection does; closed, as a closed client
// does.
type Task struct {
	c            *Cluster
	name         string
	inc          atomic.Uint64
	dead, closed atomic.Bool
	// gone is the last graph handle number registered before the task
	// last restarted.
	gone atomic.Int64
}

// Kill has f fail every call from now on.
func (f *Task) Kill() { f.dead.Store(true) }

// Incarnation returns the incarnation f answers GetStatus with.
func (f *Task) Incarnation() uint64 { return f.inc.Load() }

func (f *Task) check() error {
	if f.closed.Load() {
		return status.Errorf(wire.Unavailable, "client closed")
	}
	if f.dead.Load() {
		return status.Errorf(wire.Unavailable, "connection reset by peer")
	}
	return nil
}

// Task returns the task's name.
func (f *Task) Task() string { return f.name }

// Call carries no peer calls: the fake tasks run no graphs.
func (f *Task) Call(context.Context, rpc.Method, *rpc.Request, *rpc.Reply) error {
	return status.Errorf(wire.Unimplemented, "fake task %s makes no peer calls", f.name)
}

// GetStatus answers with one CPU device of f's incarnation.
func (f *Task) GetStatus(context.Context) (*tfpb.GetStatusResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return &tfpb.GetStatusResponse{DeviceAttributes: []*tfpb.DeviceAttributes{{Name: f.name + "/device:CPU:0", Incarnation: f.inc.Load()}}}, nil
}

// CreateWorkerSession succeeds while f answers.
func (f *Task) CreateWorkerSession(context.Context, *tfpb.CreateWorkerSessionRequest) error {
	return f.check()
}

// DeleteWorkerSession succeeds while f answers.
func (f *Task) DeleteWorkerSession(context.Context, *tfpb.DeleteWorkerSessionRequest) error {
	return f.check()
}

// RegisterGraph answers a handle new in the cluster.
func (f *Task) RegisterGraph(context.Context, *tfpb.RegisterGraphRequest) (*tfpb.RegisterGraphResponse, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	f.c.handles++
	return &tfpb.RegisterGraphResponse{GraphHandle: "g" + strconv.Itoa(f.c.handles)}, nil
}

// DeregisterGraph succeeds while f answers.
func (f *Task) DeregisterGraph(context.Context, *tfpb.DeregisterGraphRequest) error {
	return f.check()
}

// RunGraph fetches req.RecvKey (see Cluster.Fetch); a graph registered
// before f restarted is not found (Aborted).
func (f *Task) RunGraph(_ context.Context, req *tfpb.RunGraphRequest, _ []handlers.Feed, out *handlers.Fetched) error {
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
	if len(req.RecvKey) == 0 {
		return nil
	}
	if f.c.Fetch != nil {
		f.c.Fetch(req.RecvKey, out)
		return nil
	}
	out.Keys = append(out.Keys[:0], req.RecvKey...)
	out.Tensors = out.Tensors[:0]
	for range req.RecvKey {
		out.Tensors = append(out.Tensors, wire.Tensor{DType: wire.DTFloat, Data: tensor.Bytes([]float32{0.5})})
	}
	return nil
}

// CleanupGraph succeeds while f answers; dead, it first calls the
// cluster's DeadCleanup.
func (f *Task) CleanupGraph(context.Context, *tfpb.CleanupGraphRequest) error {
	if f.dead.Load() && f.c.DeadCleanup != nil {
		f.c.DeadCleanup()
	}
	return f.check()
}

// RecvTensor fetches nothing; it succeeds while f answers.
func (f *Task) RecvTensor(context.Context, *tfpb.RecvTensorRequest, *handlers.Fetched) error {
	return f.check()
}

// Stats counts nothing.
func (f *Task) Stats() handlers.Stats { return handlers.Stats{} }

// Close has every call fail from now on, as a closed client's do.
func (f *Task) Close() error {
	f.closed.Store(true)
	return nil
}

var _ driver.Caller = (*Task)(nil)
