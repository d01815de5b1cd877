package lr

import (
	"context"
	"fmt"
	"math"

	"github.com/starwire/starwire/cmd/starwire/internal/clicks"
	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A Model is the sparse logistic regression as a train.Model: it builds
// the graphs for the tasks its session gives it, initializes the table,
// runs each replica's steps on its batches, evaluates the held-out set,
// and saves and restores checkpoints (a train.Checkpointer). The session
// that trains it owns the job's life: recovery, failover and hooks.
type Model struct {
	cfg   Config
	d     *driver.Driver
	s     *train.Session
	gen   *clicks.Generator
	plan  plan
	tasks *train.Tasks // the last Build's
	held  *clicks.Batch

	inits      []driver.Graph   // [ps]
	ps         [][]driver.Graph // [replica][ps]
	worker     []driver.Graph
	evalPS     [][]driver.Graph // [replica][ps], without the update
	evalWorker []driver.Graph
	ckpt       ckptState // checkpoint.go
}

// New prepares the model of cfg, run over d, whose Callers reach the
// tasks. A session made with Options (train.NewSession, which binds the
// model to it) trains it.
func New(cfg Config, d *driver.Driver) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gc := clicks.DefaultConfig(cfg.Vocab, cfg.Seed)
	gc.Fields = cfg.Fields
	switch {
	case cfg.hash():
		gc.IDs, gc.Values = clicks.Hash64, cfg.values()
	case cfg.Values != 0:
		gc.IDs, gc.Values = clicks.Enumerated, cfg.Values
	}
	gen, err := clicks.New(gc)
	if err != nil {
		return nil, err
	}
	return &Model{cfg: cfg, d: d, gen: gen}, nil
}

// Options are the tasks and steps per replica of the session that trains
// the model.
func (m *Model) Options() train.Options {
	return train.Options{PS: m.cfg.PS, Workers: m.cfg.Workers, Steps: m.cfg.Steps}
}

// Bind makes s the session that trains the model: its step ids, global
// step and live replicas are the model's. train.NewSession calls it.
func (m *Model) Bind(s *train.Session) { m.s = s }

// A Model is trained by a train.Session, which binds it.
var (
	_ train.Model  = (*Model)(nil)
	_ train.Binder = (*Model)(nil)
)

// Build registers every partition for t, implementing train.Model: the
// table's initialization on each parameter server, and, for each live
// worker's replica, its training and evaluation partitions on the worker
// and every server. The checkpoint graphs are registered again on their
// next use.
func (m *Model) Build(ctx context.Context, t *train.Tasks) error {
	p := plan{cfg: m.cfg}
	var live []bool
	for _, ps := range t.PS {
		p.ps, p.psInc = append(p.ps, ps.Device), append(p.psInc, ps.Incarnation)
	}
	for _, w := range t.Workers {
		p.workers, p.wInc = append(p.workers, w.Device), append(p.wInc, w.Incarnation)
		live = append(live, w.Live)
	}
	register := func(dev string, def *tfpb.GraphDef) (driver.Graph, error) {
		return t.Register(ctx, task(dev), def)
	}
	var inits []driver.Graph
	for s := range m.cfg.PS {
		g, err := register(p.ps[s], p.initGraph(s))
		if err != nil {
			return err
		}
		inits = append(inits, g)
	}
	// Every replica can evaluate, so that a lost worker does not stop the
	// evaluation after training.
	var psG, evalPS [][]driver.Graph
	var workerG, evalWorker []driver.Graph
	for _, training := range []bool{true, false} {
		for r := range m.cfg.Workers {
			var ps []driver.Graph
			var w driver.Graph
			if live[r] {
				for s := range m.cfg.PS {
					g, err := register(p.ps[s], p.psGraph(r, s, training))
					if err != nil {
						return err
					}
					ps = append(ps, g)
				}
				g, err := register(p.workers[r], p.workerGraph(r, training))
				if err != nil {
					return err
				}
				w = g
			}
			if training {
				psG, workerG = append(psG, ps), append(workerG, w)
			} else {
				evalPS, evalWorker = append(evalPS, ps), append(evalWorker, w)
			}
		}
	}
	m.ckpt.mu.Lock()
	m.ckpt.save, m.ckpt.restore, m.ckpt.restoreFrom = nil, nil, 0
	m.ckpt.mu.Unlock()
	m.plan, m.inits, m.tasks = p, inits, t
	m.ps, m.worker, m.evalPS, m.evalWorker = psG, workerG, evalPS, evalWorker
	return nil
}

// Initialize sets every parameter server's variables to their initial
// values, implementing train.Model.
func (m *Model) Initialize(ctx context.Context) error {
	parts := make([]driver.Partition, len(m.inits))
	for s, g := range m.inits {
		parts[s] = driver.Partition{Graph: g}
	}
	step := m.s.NextStepID()
	if err := m.d.RunPartitions(ctx, step, parts...); err != nil {
		return fmt.Errorf("initialize the table: %w", err)
	}
	return m.d.CleanupStep(ctx, step, m.psTasks()...)
}

// task returns a device's task name.
func task(dev string) string { return dev[:len(dev)-len("/device:CPU:0")] }

// psTasks returns the parameter servers' task names.
func (m *Model) psTasks() []string {
	t := make([]string, m.cfg.PS)
	for i := range t {
		t[i] = task(device("ps", i))
	}
	return t
}

// workerTask returns worker w's task name.
func workerTask(w int) string { return task(device("worker", w)) }

// batchFeeds holds one batch's feeds and fetches, reused from step to step.
type batchFeeds struct {
	feeds []handlers.Feed
	out   handlers.Fetched
	// With the hash embedding, the servers' feeds of a training step:
	// the global step.
	psFeeds    [][]handlers.Feed
	globalStep [1]int64
}

// run runs one step of replica r on batch b: worker r's partition, fed the
// batch, and every server's, which exchange ids, rows and (with train)
// gradients with it. f.out holds the loss and probabilities.
func (m *Model) run(ctx context.Context, r int, step int64, b *clicks.Batch, f *batchFeeds, train bool) error {
	f.feeds = append(f.feeds[:0],
		handlers.Feed{Key: m.plan.idsLink(r).key(), Tensor: int64Tensor(b.IDs)},
		handlers.Feed{Key: m.plan.labelsLink(r).key(), Tensor: floatTensor(b.Labels, int64(len(b.Labels)))})
	worker, ps := m.worker[r], m.ps[r]
	if !train {
		worker, ps = m.evalWorker[r], m.evalPS[r]
	}
	parts := make([]driver.Partition, 0, m.cfg.PS+1)
	parts = append(parts, driver.Partition{
		Graph: worker, Feeds: f.feeds, Out: &f.out,
		Fetches: []string{m.plan.fetchLink(r, fetchLoss).key(), m.plan.fetchLink(r, fetchProb).key()},
	})
	for s := range m.cfg.PS {
		parts = append(parts, driver.Partition{Graph: ps[s], Feeds: m.psFeeds(r, s, f, train)})
	}
	return m.d.RunPartitions(ctx, step, parts...)
}

// psFeeds returns server s's feeds in replica r's step: with the hash
// embedding's training, the global step its rows' versions take.
func (m *Model) psFeeds(r, s int, f *batchFeeds, train bool) []handlers.Feed {
	if !m.cfg.hash() || !train {
		return nil
	}
	if len(f.psFeeds) != m.cfg.PS {
		f.psFeeds = make([][]handlers.Feed, m.cfg.PS)
	}
	f.globalStep[0] = m.s.GlobalStep()
	gs := wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes(f.globalStep[:])}
	f.psFeeds[s] = append(f.psFeeds[s][:0], handlers.Feed{Key: m.plan.globalStepLink(r, s).key(), Tensor: gs})
	return f.psFeeds[s]
}

// Replica returns replica r's steps, implementing train.Model: each on a
// batch of its own stream, drawn ahead (prefetch).
func (m *Model) Replica(r int) train.Replica {
	n := m.cfg.Steps
	if m.s.LastStep() != 0 {
		n = math.MaxInt // as many as the session takes
	}
	return &replica{m: m, batches: prefetch(m.gen.Stream(uint64(r)+1), m.cfg.BatchSize, n, m.cfg.Compute)}
}

// replica is one replica's batches and feeds, reused from step to step.
type replica struct {
	m       *Model
	batches *prefetcher
	b       *clicks.Batch // the next step's, once drawn
	f       batchFeeds
}

// Next implements train.Replica.
func (rep *replica) Next(ctx context.Context) error {
	b, err := rep.batches.next(ctx)
	if err != nil {
		return err
	}
	rep.b = b
	return nil
}

// Step implements train.Replica.
func (rep *replica) Step(ctx context.Context, on int, step int64) (float64, error) {
	err := rep.m.run(ctx, on, step, rep.b, &rep.f, true)
	rep.batches.recycle(rep.b)
	rep.b = nil
	var loss float64
	if err == nil {
		loss = float64(tensor.View[float32](rep.f.out.Tensors[0].Data)[0])
	}
	rep.f.out.Release()
	return loss, err
}

// Close implements train.Replica.
func (rep *replica) Close() {
	if rep.b != nil {
		rep.batches.recycle(rep.b)
	}
	rep.batches.close()
}

// Evaluate runs the forward pass over the held-out set and returns its
// mean log loss and accuracy. Call it while the session's steps do not
// run: before Run and after.
func (m *Model) Evaluate(ctx context.Context) (loss, acc float64, err error) {
	if m.held == nil {
		m.held = m.heldOut()
	}
	return m.evaluate(ctx, m.held)
}

// Floors returns the held-out log loss of the hidden true model, the
// floor, and that of always predicting the click rate.
func (m *Model) Floors() (bayes, baseRate float64) {
	if m.held == nil {
		m.held = m.heldOut()
	}
	return m.gen.BayesLoss(m.held), baseRateLoss(m.held)
}

// heldOut draws the held-out set from a stream no worker trains on.
func (m *Model) heldOut() *clicks.Batch {
	n := (m.cfg.HeldOut + m.cfg.BatchSize - 1) / m.cfg.BatchSize * m.cfg.BatchSize
	var b clicks.Batch
	m.gen.Stream(0).Fill(&b, n)
	return &b
}

// evaluate runs the forward pass of replica 0 over the held-out set and
// returns its mean log loss and accuracy.
func (m *Model) evaluate(ctx context.Context, held *clicks.Batch) (loss, acc float64, err error) {
	B, F := m.cfg.BatchSize, m.cfg.Fields
	var f batchFeeds
	var lossSum float64
	correct := 0
	r := max(m.s.LiveReplica(0), 0)
	tasks := append(m.psTasks(), workerTask(r))
	for i := 0; i < held.Len(); i += B {
		b := clicks.Batch{IDs: held.IDs[i*F : (i+B)*F], Labels: held.Labels[i : i+B]}
		step := m.s.NextStepID()
		err := m.run(ctx, r, step, &b, &f, false)
		if err == nil {
			lossSum += float64(tensor.View[float32](f.out.Tensors[0].Data)[0])
			for k, p := range tensor.View[float32](f.out.Tensors[1].Data) {
				if (p > 0.5) == (b.Labels[k] > 0.5) {
					correct++
				}
			}
		}
		f.out.Release()
		if cerr := m.d.CleanupStep(ctx, step, tasks...); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, 0, err
		}
	}
	batches := held.Len() / B
	return lossSum / float64(batches), float64(correct) / float64(held.Len()), nil
}

func floatTensor(v []float32, shape ...int64) wire.Tensor {
	return wire.Tensor{DType: wire.DTFloat, Shape: shape, Data: tensor.Bytes(v)}
}

func int64Tensor(v []int64) wire.Tensor {
	return wire.Tensor{DType: wire.DTInt64, Shape: []int64{int64(len(v))}, Data: tensor.Bytes(v)}
}

func baseRateLoss(b *clicks.Batch) float64 {
	var n float64
	for _, y := range b.Labels {
		n += float64(y)
	}
	rate := n / float64(max(b.Len(), 1))
	var s float64
	for _, y := range b.Labels {
		s += clicks.LogLoss(rate, y)
	}
	return s / float64(max(b.Len(), 1))
}

// InitializeKeeps says whether Initialize leaves what a parameter
// server has as it is: the hash embedding's variables are initialized
// once (InitializeKvVariableOp keeps a table made), the fixed table is
// assigned again.
func (m *Model) InitializeKeeps() bool { return m.cfg.hash() }
