package lr

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/clicks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Progress is a periodic report of a running job.
type Progress struct {
	Elapsed time.Duration
	// Steps is the run's progress, of TotalSteps: its global steps, all
	// workers together, less those a recovery undid, which are trained
	// again. Examples counts the examples of every step done.
	Steps, Examples, TotalSteps int64
	// ExamplesPerSec, RPCsPerSec and MBPerSec are rates over the last
	// interval.
	ExamplesPerSec, RPCsPerSec, MBPerSec float64
	// Loss is the mean training loss of the steps in the last interval.
	Loss float64
	// Waiting, when not empty, is the lost task the job waits for (see
	// RecoverTasks), and WaitingFor how long it has waited.
	Waiting    string
	WaitingFor time.Duration
}

// Summary is a finished job's outcome.
type Summary struct {
	Steps, Examples int64
	Elapsed         time.Duration
	// InitialLoss and FinalLoss are the held-out log loss before and after
	// training; Accuracy is the held-out accuracy after training.
	InitialLoss, FinalLoss, Accuracy float64
	// FirstTrainLoss and LastTrainLoss average the first and last tenth of
	// the training steps.
	FirstTrainLoss, LastTrainLoss float64
	// BayesLoss is the hidden true model's held-out loss, the floor; and
	// BaseRateLoss that of always predicting the click rate.
	BayesLoss, BaseRateLoss float64
	// LostSteps failed with a task that was lost (see FailOverWorkers
	// and RecoverTasks); Steps does not count them.
	LostSteps int64
	// UndoneSteps are global steps a recovery from a lost parameter
	// server undid: those since the checkpoint it restored, or all of
	// them without one (see RecoverTasks). Steps counts them; under
	// StopAtStep they were trained again.
	UndoneSteps int64
	// GlobalStep is the global step the run ended at, and LastStep the
	// one StopAtStep asked for (0 without it).
	GlobalStep, LastStep int64
	// Calls and Bytes count every RPC of the run (driver and task to task)
	// and the metadata and tensor bytes they moved.
	Calls, Bytes int64
	// PSBytes are, per parameter server, the bytes of the training calls
	// it made or answered (the driver's and its peers'), by task index.
	PSBytes []int64
}

// ExamplesPerSec is the training throughput.
func (s *Summary) ExamplesPerSec() float64 { return float64(s.Examples) / s.Elapsed.Seconds() }

// A Job is the model, trained by its train.Session over a driver whose
// Callers reach the tasks: it builds the graphs for the tasks the
// session gives it, initializes the table, runs each replica's steps on
// its batches, evaluates the held-out set and saves and restores
// checkpoints.
type Job struct {
	cfg   Config
	d     *driver.Driver
	s     *train.Session
	stats func() driver.Stats // every RPC of the run, driver's included
	gen   *clicks.Generator
	plan  plan
	tasks *train.Tasks // the last Build's

	inits      []driver.Graph   // [ps]
	ps         [][]driver.Graph // [replica][ps]
	worker     []driver.Graph
	evalPS     [][]driver.Graph // [replica][ps], without the update
	evalWorker []driver.Graph
	taskStats  func(task string) driver.Stats
	ckpt       ckptState // checkpoint.go
}

// New prepares a job; stats, when not nil, returns the RPCs of the whole run
// (the driver's and those the tasks make to each other), else the driver's
// alone are counted.
func New(cfg Config, d *driver.Driver, stats func() driver.Stats) (*Job, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if stats == nil {
		stats = d.Stats
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
	j := &Job{cfg: cfg, d: d, stats: stats, gen: gen}
	j.taskStats = d.TaskStats
	j.s = train.NewSession(d, j, train.Options{PS: cfg.PS, Workers: cfg.Workers, Steps: cfg.Steps})
	return j, nil
}

// Session returns the session that trains the job.
func (j *Job) Session() *train.Session { return j.s }

// CountTasks makes Summary.PSBytes count what f says a task's calls moved,
// to and from it; by default, only the driver's calls to it are counted.
// Call it before Run.
func (j *Job) CountTasks(f func(task string) driver.Stats) { j.taskStats = f }

// Setup asks every task for its status, creates the worker sessions,
// registers every partition and initializes the table (train.Session's
// Setup).
func (j *Job) Setup(ctx context.Context) error { return j.s.Setup(ctx) }

// Build registers every partition for t, implementing train.Model: the
// table's initialization on each parameter server, and, for each live
// worker's replica, its training and evaluation partitions on the worker
// and every server. The checkpoint graphs are registered again on their
// next use.
func (j *Job) Build(ctx context.Context, t *train.Tasks) error {
	p := plan{cfg: j.cfg}
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
	for s := range j.cfg.PS {
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
		for r := range j.cfg.Workers {
			var ps []driver.Graph
			var w driver.Graph
			if live[r] {
				for s := range j.cfg.PS {
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
	j.ckpt.mu.Lock()
	j.ckpt.save, j.ckpt.restore, j.ckpt.restoreFrom = nil, nil, 0
	j.ckpt.mu.Unlock()
	j.plan, j.inits, j.tasks = p, inits, t
	j.ps, j.worker, j.evalPS, j.evalWorker = psG, workerG, evalPS, evalWorker
	return nil
}

// Initialize sets every parameter server's variables to their initial
// values, implementing train.Model.
func (j *Job) Initialize(ctx context.Context) error {
	parts := make([]driver.Partition, len(j.inits))
	for s, g := range j.inits {
		parts[s] = driver.Partition{Graph: g}
	}
	step := j.s.NextStepID()
	if err := j.d.RunPartitions(ctx, step, parts...); err != nil {
		return fmt.Errorf("initialize the table: %w", err)
	}
	return j.d.CleanupStep(ctx, step, j.psTasks()...)
}

// task returns a device's task name.
func task(dev string) string { return dev[:len(dev)-len("/device:CPU:0")] }

// psTasks returns the parameter servers' task names.
func (j *Job) psTasks() []string {
	t := make([]string, j.cfg.PS)
	for i := range t {
		t[i] = task(device("ps", i))
	}
	return t
}

// workerTask returns worker w's task name.
func workerTask(w int) string { return task(device("worker", w)) }

// Run evaluates the held-out set, trains every worker for cfg.Steps steps
// concurrently through the session while reporting progress, and
// evaluates again.
func (j *Job) Run(ctx context.Context, progress func(Progress)) (*Summary, error) {
	held := j.heldOut()
	sum := &Summary{BayesLoss: j.gen.BayesLoss(held), BaseRateLoss: baseRateLoss(held)}
	var err error
	if sum.InitialLoss, _, err = j.evaluate(ctx, held); err != nil {
		return nil, fmt.Errorf("evaluate before training: %w", err)
	}
	start := time.Now()
	before := j.stats()
	psBefore := j.psStats()
	hook := train.NewProgressHook(j.s, train.ProgressOptions{Every: j.cfg.ProgressEvery, Stats: j.stats}, j.progress(progress))
	hook.Begin()
	rctx, stop := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() {
		defer close(reported)
		hook.Run(rctx)
	}()
	err = j.s.Run(ctx)
	stop()
	<-reported
	if err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	after := j.stats()
	sum.Calls, sum.Bytes = after.Calls-before.Calls, after.Bytes-before.Bytes
	for s, st := range j.psStats() {
		sum.PSBytes = append(sum.PSBytes, st.Bytes-psBefore[s].Bytes)
	}
	sum.Steps, sum.LostSteps = j.s.Steps()
	sum.UndoneSteps = j.s.UndoneSteps()
	sum.GlobalStep, sum.LastStep = j.s.GlobalStep(), j.s.LastStep()
	sum.Examples = sum.Steps * int64(j.cfg.BatchSize)
	losses := j.s.Losses(0)
	tenth := max(len(losses)/10, 1)
	sum.FirstTrainLoss, sum.LastTrainLoss = mean(losses[:min(tenth, len(losses))]), mean(losses[max(len(losses)-tenth, 0):])
	if sum.FinalLoss, sum.Accuracy, err = j.evaluate(ctx, held); err != nil {
		return nil, fmt.Errorf("evaluate after training: %w", err)
	}
	return sum, nil
}

// psStats returns what each parameter server's calls have moved so far.
func (j *Job) psStats() []driver.Stats {
	out := make([]driver.Stats, j.cfg.PS)
	for s, task := range j.psTasks() {
		out[s] = j.taskStats(task)
	}
	return out
}

// progress turns the session's reports into the job's, for progress;
// nil reports nothing.
func (j *Job) progress(progress func(Progress)) func(train.Progress) {
	batch := int64(j.cfg.BatchSize)
	return func(p train.Progress) {
		if progress == nil {
			return
		}
		progress(Progress{
			Waiting: p.Waiting, WaitingFor: p.WaitingFor,
			Elapsed: p.Elapsed, Steps: p.Steps, Examples: p.Done * batch, TotalSteps: j.cfg.TotalSteps(),
			ExamplesPerSec: p.PerSec(p.DoneInInterval * batch),
			RPCsPerSec:     p.PerSec(p.Calls),
			MBPerSec:       p.PerSec(p.Bytes) / 1e6,
			Loss:           p.Loss,
		})
	}
}

// batchFeeds holds one batch's feeds and fetches, reused from step to step.
type batchFeeds struct {
	feeds []driver.Feed
	out   driver.Fetched
	// With the hash embedding, the servers' feeds of a training step:
	// the global step.
	psFeeds    [][]driver.Feed
	globalStep [1]int64
}

// run runs one step of replica r on batch b: worker r's partition, fed the
// batch, and every server's, which exchange ids, rows and (with train)
// gradients with it. f.out holds the loss and probabilities.
func (j *Job) run(ctx context.Context, r int, step int64, b *clicks.Batch, f *batchFeeds, train bool) error {
	f.feeds = append(f.feeds[:0],
		driver.Feed{Key: j.plan.idsLink(r).key(), Tensor: int64Tensor(b.IDs)},
		driver.Feed{Key: j.plan.labelsLink(r).key(), Tensor: floatTensor(b.Labels, int64(len(b.Labels)))})
	worker, ps := j.worker[r], j.ps[r]
	if !train {
		worker, ps = j.evalWorker[r], j.evalPS[r]
	}
	parts := make([]driver.Partition, 0, j.cfg.PS+1)
	parts = append(parts, driver.Partition{
		Graph: worker, Feeds: f.feeds, Out: &f.out,
		Fetches: []string{j.plan.fetchLink(r, fetchLoss).key(), j.plan.fetchLink(r, fetchProb).key()},
	})
	for s := range j.cfg.PS {
		parts = append(parts, driver.Partition{Graph: ps[s], Feeds: j.psFeeds(r, s, f, train)})
	}
	return j.d.RunPartitions(ctx, step, parts...)
}

// psFeeds returns server s's feeds in replica r's step: with the hash
// embedding's training, the global step its rows' versions take.
func (j *Job) psFeeds(r, s int, f *batchFeeds, train bool) []driver.Feed {
	if !j.cfg.hash() || !train {
		return nil
	}
	if len(f.psFeeds) != j.cfg.PS {
		f.psFeeds = make([][]driver.Feed, j.cfg.PS)
	}
	f.globalStep[0] = j.s.GlobalStep()
	gs := wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes(f.globalStep[:])}
	f.psFeeds[s] = append(f.psFeeds[s][:0], driver.Feed{Key: j.plan.globalStepLink(r, s).key(), Tensor: gs})
	return f.psFeeds[s]
}

// FailOverWorkers makes a lost worker lose only its steps in flight
// (train.Session.FailOverWorkers). Call it before Run.
func (j *Job) FailOverWorkers() { j.s.FailOverWorkers() }

// RecoverTasks makes a lost task cost steps, not the job
// (train.Session.RecoverTasks). Call it before Run.
func (j *Job) RecoverTasks(o train.RecoverOptions) { j.s.RecoverTasks(o) }

// Replica returns replica r's steps, implementing train.Model: each on a
// batch of its own stream, drawn ahead (prefetch).
func (j *Job) Replica(r int) train.Replica {
	n := j.cfg.Steps
	if j.s.LastStep() != 0 {
		n = math.MaxInt // as many as the session takes
	}
	return &replica{j: j, batches: prefetch(j.gen.Stream(uint64(r)+1), j.cfg.BatchSize, n, j.cfg.Compute)}
}

// StopAtStep makes the run end at global step last, steps undone by a
// recovery trained again (train.Session.StopAtStep). Call it before Run.
func (j *Job) StopAtStep(last int64) { j.s.StopAtStep(last) }

// replica is one replica's batches and feeds, reused from step to step.
type replica struct {
	j       *Job
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
	err := rep.j.run(ctx, on, step, rep.b, &rep.f, true)
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

// heldOut draws the held-out set from a stream no worker trains on.
func (j *Job) heldOut() *clicks.Batch {
	n := (j.cfg.HeldOut + j.cfg.BatchSize - 1) / j.cfg.BatchSize * j.cfg.BatchSize
	var b clicks.Batch
	j.gen.Stream(0).Fill(&b, n)
	return &b
}

// evaluate runs the forward pass of replica 0 over the held-out set and
// returns its mean log loss and accuracy.
func (j *Job) evaluate(ctx context.Context, held *clicks.Batch) (loss, acc float64, err error) {
	B, F := j.cfg.BatchSize, j.cfg.Fields
	var f batchFeeds
	var lossSum float64
	correct := 0
	r := max(j.s.LiveReplica(0), 0)
	tasks := append(j.psTasks(), workerTask(r))
	for i := 0; i < held.Len(); i += B {
		b := clicks.Batch{IDs: held.IDs[i*F : (i+B)*F], Labels: held.Labels[i : i+B]}
		step := j.s.NextStepID()
		err := j.run(ctx, r, step, &b, &f, false)
		if err == nil {
			lossSum += float64(tensor.View[float32](f.out.Tensors[0].Data)[0])
			for k, p := range tensor.View[float32](f.out.Tensors[1].Data) {
				if (p > 0.5) == (b.Labels[k] > 0.5) {
					correct++
				}
			}
		}
		f.out.Release()
		if cerr := j.d.CleanupStep(ctx, step, tasks...); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, 0, err
		}
	}
	batches := held.Len() / B
	return lossSum / float64(batches), float64(correct) / float64(held.Len()), nil
}

// Close deregisters the graphs and deletes the sessions.
func (j *Job) Close(ctx context.Context) error { return j.s.Close(ctx) }

func floatTensor(v []float32, shape ...int64) wire.Tensor {
	return wire.Tensor{DType: wire.DTFloat, Shape: shape, Data: tensor.Bytes(v)}
}

func int64Tensor(v []int64) wire.Tensor {
	return wire.Tensor{DType: wire.DTInt64, Shape: []int64{int64(len(v))}, Data: tensor.Bytes(v)}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
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
