package handlers

import (
	"context"
	"fmt"
	"sync"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// cluster is a ps task and a worker task that reach each other through
// their Resolvers.
type cluster struct {
	ps, worker *testTask
	mu         sync.Mutex
	clients    map[string]*rpc.Client
}

func newCluster(t *testing.T, psOpts Options) *cluster {
	c := &cluster{clients: make(map[string]*rpc.Client)}
	resolve := func(task string) (Caller, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if cl := c.clients[task]; cl != nil {
			return cl, nil
		}
		return nil, fmt.Errorf("no task %s", task)
	}
	psOpts.Job, psOpts.Resolver = "ps", resolve
	c.ps = startTask(t, psOpts)
	c.worker = startTask(t, Options{Job: "worker", Resolver: resolve})
	c.mu.Lock()
	c.clients[c.ps.w.Task()] = c.ps.client
	c.clients[c.worker.w.Task()] = c.worker.client
	c.mu.Unlock()
	return c
}

const (
	vocab = 8
	batch = 4
)

// logisticGraphs returns the two partitions of a sparse logistic regression
// with one weight per feature id: the ps gathers the rows of the batch's
// ids, the worker computes the loss and dL/dz = sigmoid(z) - y, and the ps
// applies it with sparse Adagrad. The ids travel worker→ps and the rows and
// gradients in both directions through RecvTensor.
func logisticGraphs(c *cluster) (ps, worker *tfpb.GraphDef) {
	f, i64t := wire.DTFloat, wire.DTInt64
	psDev, wkDev := c.ps.w.Device(), c.worker.w.Device()
	psInc, wkInc := c.ps.w.Incarnation(), c.worker.w.Incarnation()
	ps = GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{vocab, 1})),
		NodeDef("acc", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{vocab, 1})),
		RecvNode("ids", "ids:0", i64t, wkDev, wkInc, psDev),
		NodeDef("rows", "ResourceGather", In("emb", "ids"), Attrs("dtype", f, "Tindices", i64t)),
		SendNode("rows/_send", "rows", "rows:0", f, psDev, psInc, wkDev),
		RecvNode("grad", "grad:0", f, wkDev, wkInc, psDev),
		ConstF32("lr", nil, 0.5),
		NodeDef("apply", "ResourceSparseApplyAdagrad", In("emb", "acc", "lr", "grad", "ids"), Attrs("T", f, "Tindices", i64t)),
	)
	worker = GraphDef(
		FeedNode("ids", "ids:0", i64t, wkDev),
		FeedNode("y", "y:0", f, wkDev),
		SendNode("ids/_send", "ids", "ids:0", i64t, wkDev, wkInc, psDev),
		RecvNode("z", "rows:0", f, psDev, psInc, wkDev),
		NodeDef("p", "Sigmoid", In("z"), Attrs("T", f)),
		NodeDef("grad", "Sub", In("p", "y"), Attrs("T", f)),
		SendNode("grad/_send", "grad", "grad:0", f, wkDev, wkInc, psDev),
		// loss = -Σ y·log p + (1-y)·log(1-p)
		ConstF32("one", nil, 1),
		NodeDef("logp", "Log", In("p"), Attrs("T", f)),
		NodeDef("q", "Sub", In("one", "p"), Attrs("T", f)),
		NodeDef("logq", "Log", In("q"), Attrs("T", f)),
		NodeDef("ny", "Sub", In("one", "y"), Attrs("T", f)),
		NodeDef("a", "Mul", In("y", "logp"), Attrs("T", f)),
		NodeDef("b", "Mul", In("ny", "logq"), Attrs("T", f)),
		NodeDef("ab", "AddV2", In("a", "b"), Attrs("T", f)),
		ConstI32("axes", []int64{2}, 0, 1),
		NodeDef("s", "Sum", In("ab", "axes"), Attrs("T", f)),
		NodeDef("loss", "Neg", In("s"), Attrs("T", f)),
		FetchNode("loss/_send", "loss", "loss:0", f, wkDev, wkInc),
	)
	return ps, worker
}

// initPS registers and runs the ps's initializer: zero weights, Adagrad
// accumulators at 0.1 (a one-value Const broadcast to the whole shape).
func initPS(t *testing.T, ctx context.Context, ps *testTask) {
	f := wire.DTFloat
	reg, err := ps.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		NodeDef("emb", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{vocab, 1})),
		NodeDef("acc", "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{vocab, 1})),
		ConstF32("zeros", []int64{vocab, 1}),
		ConstF32("tenth", []int64{vocab, 1}, 0.1),
		NodeDef("init_emb", "AssignVariableOp", In("emb", "zeros"), Attrs("dtype", f)),
		NodeDef("init_acc", "AssignVariableOp", In("acc", "tenth"), Attrs("dtype", f)),
	)})
	if err != nil {
		t.Fatal(err)
	}
	var out Fetched
	defer out.Release()
	if err := ps.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 1}, nil, &out); err != nil {
		t.Fatal(err)
	}
}

// trainer runs steps of the logistic regression.
type trainer struct {
	c              *cluster
	psH, wkH       string
	idsKey, yKey   string
	lossKey        string
	cleanupEachRun bool
}

func newTrainer(t *testing.T, ctx context.Context, c *cluster) *trainer {
	psG, wkG := logisticGraphs(c)
	psReg, err := c.ps.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: psG})
	if err != nil {
		t.Fatal(err)
	}
	wkReg, err := c.worker.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: wkG})
	if err != nil {
		t.Fatal(err)
	}
	wkDev := c.worker.w.Device()
	return &trainer{c: c, psH: psReg.GraphHandle, wkH: wkReg.GraphHandle, idsKey: FeedKey("ids:0", wkDev), yKey: FeedKey("y:0", wkDev),
		lossKey: FetchKey("loss:0", wkDev, c.worker.w.Incarnation()), cleanupEachRun: true}
}

// step runs both partitions of one step at once, as a master does, and
// returns the loss.
func (tr *trainer) step(ctx context.Context, id int64, ids []int64, ys []float32) (float32, error) {
	idsT, yT := I64([]int64{int64(len(ids))}, ids...), F32([]int64{int64(len(ys)), 1}, ys...)
	defer idsT.Buf.Release()
	defer yT.Buf.Release()
	psErr := make(chan error, 1)
	go func() {
		var out Fetched
		defer out.Release()
		err := tr.c.ps.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: tr.psH, StepId: id}, nil, &out)
		psErr <- err
	}()
	var out Fetched
	defer out.Release()
	err := tr.c.worker.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: tr.wkH, StepId: id, RecvKey: []string{tr.lossKey}},
		[]Feed{{Key: tr.idsKey, Tensor: idsT}, {Key: tr.yKey, Tensor: yT}}, &out)
	if err != nil {
		// A failed partition: clean the step up so the other one stops.
		tr.c.ps.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: id})
		tr.c.worker.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: id})
		<-psErr
		return 0, err
	}
	if err := <-psErr; err != nil {
		return 0, err
	}
	loss := tensor.View[float32](out.Tensors[0].Data)[0]
	if tr.cleanupEachRun {
		tr.c.ps.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: id})
		tr.c.worker.star.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: id})
	}
	return loss, nil
}

// batchFor returns ids and labels: even ids are positive.
func batchFor(step int) ([]int64, []float32) {
	ids := make([]int64, batch)
	ys := make([]float32, batch)
	for i := range ids {
		ids[i] = int64((step*batch + i*3) % vocab)
		if ids[i]%2 == 0 {
			ys[i] = 1
		}
	}
	return ids, ys
}

func readVariable(t *testing.T, ctx context.Context, task *testTask, name string, shape []int64) []float32 {
	t.Helper()
	f := wire.DTFloat
	reg, err := task.star.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: GraphDef(
		NodeDef(name, "VarHandleOp", nil, Attrs("dtype", f, "shape", shape)),
		NodeDef("read", "ReadVariableOp", In(name), Attrs("dtype", f)),
	)})
	if err != nil {
		t.Fatal(err)
	}
	var out Fetched
	defer out.Release()
	if err := task.star.RunGraph(ctx, &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: 999999, RecvKey: []string{"read"}}, nil, &out); err != nil {
		t.Fatal(err)
	}
	return Floats(&out.Tensors[0])
}

func TestTwoPartitionTraining(t *testing.T) {
	c := newCluster(t, Options{})
	ctx := testCtx(t)
	initPS(t, ctx, c.ps)
	tr := newTrainer(t, ctx, c)
	var first, last float32
	for s := 0; s < 30; s++ {
		ids, ys := batchFor(s)
		loss, err := tr.step(ctx, int64(100+s), ids, ys)
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		if s == 0 {
			first = loss
		}
		last = loss
	}
	// Zero weights give p = 0.5 everywhere: the first loss is 4·ln 2.
	if !ApproxEqual([]float32{first}, []float32{4 * 0.6931472}) {
		t.Fatalf("first loss %v, want 4 ln 2", first)
	}
	if last > first/4 {
		t.Fatalf("loss went from %v to %v: not learning", first, last)
	}
	emb := readVariable(t, ctx, c.ps, "emb", []int64{vocab, 1})
	for id, w := range emb {
		if (id%2 == 0) != (w > 0) {
			t.Fatalf("weight of id %d is %v: wrong sign (%v)", id, w, emb)
		}
	}
	for _, task := range []*testTask{c.ps, c.worker} {
		if steps, keys := task.w.Rendezvous().Len(); steps != 0 || keys != 0 {
			t.Fatalf("%s: rendezvous holds %d steps, %d keys after cleanup", task.w.Task(), steps, keys)
		}
	}
}

// TestConcurrentSteps runs many two-partition steps at once, their sparse
// updates of the same rows racing (run it with -race).
func TestConcurrentSteps(t *testing.T) {
	c := newCluster(t, Options{})
	ctx := testCtx(t)
	initPS(t, ctx, c.ps)
	tr := newTrainer(t, ctx, c)
	const steps, parallel = 40, 8
	var wg sync.WaitGroup
	errs := make(chan error, steps)
	sem := make(chan struct{}, parallel)
	for s := 0; s < steps; s++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			// Every step updates row 0 with label 1 and row 1 with label 0.
			if _, err := tr.step(ctx, int64(1000+s), []int64{0, 1, 0, 1}, []float32{1, 0, 1, 0}); err != nil {
				errs <- fmt.Errorf("step %d: %w", s, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	acc := readVariable(t, ctx, c.ps, "acc", []int64{vocab, 1})
	// Each step adds two g² to rows 0 and 1 and nothing elsewhere.
	if acc[0] <= 0.1 || acc[1] <= 0.1 || acc[2] != 0.1 {
		t.Fatalf("accumulators %v", acc)
	}
	for _, task := range []*testTask{c.ps, c.worker} {
		if steps, keys := task.w.Rendezvous().Len(); steps != 0 || keys != 0 {
			t.Fatalf("%s: rendezvous holds %d steps, %d keys", task.w.Task(), steps, keys)
		}
	}
}
