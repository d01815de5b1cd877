package lr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/clicks"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Progress is a periodic report of a running job.
type Progress struct {
	Elapsed time.Duration
	// Steps and Examples are totals over all workers, of TotalSteps.
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
	// them without one (see RecoverTasks). Steps counts them.
	UndoneSteps int64
	// Calls and Bytes count every RPC of the run (driver and task to task)
	// and the metadata and tensor bytes they moved.
	Calls, Bytes int64
	// PSBytes are, per parameter server, the bytes of the training calls
	// it made or answered (the driver's and its peers'), by task index.
	PSBytes []int64
}

// ExamplesPerSec is the training throughput.
func (s *Summary) ExamplesPerSec() float64 { return float64(s.Examples) / s.Elapsed.Seconds() }

// A Job trains the model over a driver whose Callers reach the tasks.
type Job struct {
	cfg   Config
	d     *driver.Driver
	stats func() driver.Stats // every RPC of the run, driver's included
	gen   *clicks.Generator
	plan  plan

	inits      []driver.Graph   // [ps]
	ps         [][]driver.Graph // [replica][ps]
	worker     []driver.Graph
	evalPS     [][]driver.Graph // [replica][ps], without the update
	evalWorker []driver.Graph
	taskStats  func(task string) driver.Stats
	// failover gives a lost worker's steps to the others (see
	// FailOverWorkers).
	failover bool
	rec      *recovery // recover.go; nil without RecoverTasks

	nextStep atomic.Int64
	steps    atomic.Int64
	lost     atomic.Int64 // steps that failed with their worker
	mu       sync.Mutex
	losses   []float64 // by completion order
	ckpt     ckptState // checkpoint.go
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
	gen, err := clicks.New(gc)
	if err != nil {
		return nil, err
	}
	j := &Job{cfg: cfg, d: d, stats: stats, gen: gen}
	j.taskStats = d.TaskStats
	j.nextStep.Store(int64(rand.Uint32())<<20 + 1)
	return j, nil
}

// CountTasks makes Summary.PSBytes count what f says a task's calls moved,
// to and from it; by default, only the driver's calls to it are counted.
// Call it before Run.
func (j *Job) CountTasks(f func(task string) driver.Stats) { j.taskStats = f }

// Setup asks every task for its status (the incarnations rendezvous keys
// need), creates the worker sessions, registers every partition and
// initializes the table.
func (j *Job) Setup(ctx context.Context) error {
	if err := j.build(ctx, nil); err != nil {
		return err
	}
	return j.initialize(ctx)
}

// build asks every task not found lost for its status, creates the
// sessions (carrying def, when not nil) and registers every partition,
// replacing the job's graphs, which it deregisters: after a restart the
// incarnations, and so the rendezvous keys, are new. A lost worker's
// replica gets no graphs (its steps go over another's). The steps must be
// paused.
func (j *Job) build(ctx context.Context, def *tfpb.ServerDef) error {
	p := plan{cfg: j.cfg}
	var live []bool
	for _, job := range []string{"ps", "worker"} {
		n := j.cfg.PS
		if job == "worker" {
			n = j.cfg.Workers
		}
		for i := range n {
			dev := device(job, i)
			c, err := j.d.Caller(task(dev))
			if err != nil {
				return err
			}
			var inc uint64
			known := job == "worker" && len(j.plan.wInc) > i // a worker the job had
			lost := known && j.d.Lost(task(dev)) != nil
			if !lost {
				st, err := c.GetStatus(ctx)
				if err != nil {
					err = fmt.Errorf("driver: GetStatus of %s: %w", task(dev), err)
					// A worker lost since is left out; a ps is
					// waited for (see recover).
					if perr := j.d.Probe(ctx, task(dev)); perr != nil {
						err = perr
					}
					if !known || !errors.Is(err, driver.ErrTaskLost) {
						return err
					}
					lost = true
				} else if len(st.GetDeviceAttributes()) == 0 {
					return fmt.Errorf("%s reported no device", dev)
				} else {
					inc = st.GetDeviceAttributes()[0].GetIncarnation()
				}
			}
			if lost {
				inc = j.plan.wInc[i]
			}
			if job == "ps" {
				p.ps, p.psInc = append(p.ps, dev), append(p.psInc, inc)
			} else {
				p.workers, p.wInc = append(p.workers, dev), append(p.wInc, inc)
				live = append(live, !lost)
			}
		}
	}
	if err := j.d.CreateSessions(ctx, def); err != nil {
		return err
	}
	var graphs []driver.Graph
	register := func(dev string, def *tfpb.GraphDef) (driver.Graph, error) {
		g, err := j.d.RegisterGraph(ctx, task(dev), def)
		if err == nil {
			graphs = append(graphs, g)
		}
		return g, err
	}
	fail := func(err error) error {
		j.d.Forget(ctx, graphs...)
		return err
	}
	var inits []driver.Graph
	for s := range j.cfg.PS {
		g, err := register(p.ps[s], p.initGraph(s))
		if err != nil {
			return fail(err)
		}
		inits = append(inits, g)
	}
	// Every replica can evaluate, so that a lost worker does not stop the
	// evaluation after training.
	var psG, evalPS [][]driver.Graph
	var workerG, evalWorker []driver.Graph
	for _, train := range []bool{true, false} {
		for r := range j.cfg.Workers {
			var ps []driver.Graph
			var w driver.Graph
			if live[r] {
				for s := range j.cfg.PS {
					g, err := register(p.ps[s], p.psGraph(r, s, train))
					if err != nil {
						return fail(err)
					}
					ps = append(ps, g)
				}
				g, err := register(p.workers[r], p.workerGraph(r, train))
				if err != nil {
					return fail(err)
				}
				w = g
			}
			if train {
				psG, workerG = append(psG, ps), append(workerG, w)
			} else {
				evalPS, evalWorker = append(evalPS, ps), append(evalWorker, w)
			}
		}
	}
	old := slices.Clone(j.inits)
	for _, gs := range [][][]driver.Graph{j.ps, j.evalPS} {
		for _, g := range gs {
			old = append(old, g...)
		}
	}
	old = append(old, j.worker...)
	old = append(old, j.evalWorker...)
	j.ckpt.mu.Lock()
	old = append(old, j.ckpt.save...)
	old = append(old, j.ckpt.restore...)
	if j.ckpt.save != nil {
		old = append(old, j.ckpt.merge)
	}
	j.ckpt.save, j.ckpt.restore, j.ckpt.restoreFrom = nil, nil, 0
	j.ckpt.mu.Unlock()
	old = slices.DeleteFunc(old, func(g driver.Graph) bool { return g.Handle == "" })
	// A restarted task's graphs are gone with it, and its new graphs may
	// have their handles: those are dropped, not deregistered.
	restarted := map[string]bool{}
	for i, dev := range j.plan.ps {
		restarted[task(dev)] = p.psInc[i] != j.plan.psInc[i]
	}
	for i, dev := range j.plan.workers {
		restarted[task(dev)] = p.wInc[i] != j.plan.wInc[i]
	}
	gone := slices.DeleteFunc(slices.Clone(old), func(g driver.Graph) bool { return !restarted[g.Task] })
	old = slices.DeleteFunc(old, func(g driver.Graph) bool { return restarted[g.Task] })
	j.d.Drop(gone...)
	j.d.Forget(ctx, old...)
	j.plan, j.inits = p, inits
	j.ps, j.worker, j.evalPS, j.evalWorker = psG, workerG, evalPS, evalWorker
	return nil
}

// initialize sets every parameter server's variables to their initial
// values.
func (j *Job) initialize(ctx context.Context) error {
	parts := make([]driver.Partition, len(j.inits))
	for s, g := range j.inits {
		parts[s] = driver.Partition{Graph: g}
	}
	step := j.nextStep.Add(1)
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
// concurrently while reporting progress, and evaluates again.
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
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	done := make(chan struct{})
	if j.rec != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.rejoin(ctx, done)
		}()
	}
	var workers sync.WaitGroup
	for r := range j.cfg.Workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if err := j.train(ctx, r); err != nil {
				cancel(err)
			}
		}()
	}
	go func() { workers.Wait(); close(done) }()
	j.report(done, start, before, progress)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	after := j.stats()
	sum.Calls, sum.Bytes = after.Calls-before.Calls, after.Bytes-before.Bytes
	for s, st := range j.psStats() {
		sum.PSBytes = append(sum.PSBytes, st.Bytes-psBefore[s].Bytes)
	}
	sum.Steps, sum.LostSteps = j.steps.Load(), j.lost.Load()
	if j.rec != nil {
		sum.UndoneSteps = j.rec.undone.Load()
	}
	sum.Examples = sum.Steps * int64(j.cfg.BatchSize)
	j.mu.Lock()
	tenth := max(len(j.losses)/10, 1)
	sum.FirstTrainLoss, sum.LastTrainLoss = mean(j.losses[:tenth]), mean(j.losses[len(j.losses)-tenth:])
	j.mu.Unlock()
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

// report calls progress every interval until done is closed.
func (j *Job) report(done <-chan struct{}, start time.Time, before driver.Stats, progress func(Progress)) {
	t := time.NewTicker(j.cfg.ProgressEvery)
	defer t.Stop()
	last, lastAt, lastSteps, lastLosses := before, start, int64(0), 0
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			st, steps := j.stats(), j.steps.Load()
			dt := now.Sub(lastAt).Seconds()
			j.mu.Lock()
			loss := mean(j.losses[lastLosses:])
			lastLosses = len(j.losses)
			j.mu.Unlock()
			if progress != nil {
				waiting, since := j.waitingFor()
				var waited time.Duration
				if waiting != "" {
					waited = now.Sub(since)
				}
				progress(Progress{
					Waiting: waiting, WaitingFor: waited,
					Elapsed: now.Sub(start), Steps: steps, Examples: steps * int64(j.cfg.BatchSize), TotalSteps: j.cfg.TotalSteps(),
					ExamplesPerSec: float64((steps-lastSteps)*int64(j.cfg.BatchSize)) / dt,
					RPCsPerSec:     float64(st.Calls-last.Calls) / dt,
					MBPerSec:       float64(st.Bytes-last.Bytes) / dt / 1e6,
					Loss:           loss,
				})
			}
			last, lastAt, lastSteps = st, now, steps
		}
	}
}

// batchFeeds holds one batch's feeds and fetches, reused from step to step.
type batchFeeds struct {
	feeds []driver.Feed
	out   driver.Fetched
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
		parts = append(parts, driver.Partition{Graph: ps[s]})
	}
	return j.d.RunPartitions(ctx, step, parts...)
}

// FailOverWorkers makes a lost worker lose only its steps in flight: the
// batches of its replica go on over another worker that answers (its
// graphs), as TensorFlow's coordinator gives a lost worker's closures to
// the others. A lost parameter server still fails the run. Call it before
// Run.
func (j *Job) FailOverWorkers() { j.failover = true }

// lostWorker reports whether err is the loss of worker w.
func (j *Job) lostWorker(err error, w int) bool {
	var te *driver.TaskError
	return errors.As(err, &te) && te.Task == workerTask(w)
}

// anyLostWorker reports whether err is the loss of a worker.
func (j *Job) anyLostWorker(err error) bool {
	for w := range j.cfg.Workers {
		if j.lostWorker(err, w) {
			return true
		}
	}
	return false
}

// liveReplica returns the first replica from r on whose worker no loss is
// known, or -1.
func (j *Job) liveReplica(r int) int {
	for k := range j.cfg.Workers {
		if w := (r + k) % j.cfg.Workers; j.d.Lost(workerTask(w)) == nil {
			return w
		}
	}
	return -1
}

// train runs replica r's steps, over worker r's graphs unless it is lost
// and failover is on. With RecoverTasks, a step that fails with a lost
// parameter server waits for the recovery and the worker goes on.
func (j *Job) train(ctx context.Context, r int) error {
	batches := prefetch(j.gen.Stream(uint64(r)+1), j.cfg.BatchSize, j.cfg.Steps, j.cfg.Compute)
	defer batches.close()
	var f batchFeeds
	on := r // the replica whose graphs run the steps
	tasks := append(j.psTasks(), workerTask(on))
	var cleanup background
	defer cleanup.wait()
	for range j.cfg.Steps {
		b, err := batches.next(ctx)
		if err != nil {
			return fmt.Errorf("worker %d: %w", r, err)
		}
		gen, err := j.rec.enter()
		if err != nil {
			batches.recycle(b)
			return fmt.Errorf("worker %d: %w", r, err)
		}
		if j.rec != nil && on != r && j.d.Lost(workerTask(r)) == nil {
			// Worker r rejoined.
			on, tasks = r, append(j.psTasks(), workerTask(r))
		}
		step := j.nextStep.Add(1)
		err = j.run(ctx, on, step, b, &f, true)
		batches.recycle(b)
		var loss float64
		if err == nil {
			loss = float64(tensor.View[float32](f.out.Tensors[0].Data)[0])
		}
		f.out.Release()
		// The step's cleanup runs while the next step does, as
		// TensorFlow's master cleans partitions up asynchronously after
		// each run: one at a time, its error reported by the step after.
		// A lost task's failed cleanup is not the run's failure when the
		// job recovers from it.
		if cerr := cleanup.wait(); err == nil && !j.forgivable(cerr) {
			err = cerr
		}
		stepTasks, failedOver := tasks, err != nil && j.failover && j.lostWorker(err, on)
		if failedOver {
			// The parameter servers still hold the step's state.
			stepTasks = j.psTasks()
		}
		cleanup.start(j.rec.track(func() error { return j.d.CleanupStep(ctx, step, stepTasks...) }))
		if failedOver {
			j.rec.leave()
			j.lost.Add(1)
			if j.rec != nil {
				j.rec.log("%s lost: replica %d's batches go to another worker until it answers again", workerTask(on), r)
			}
			if on = j.liveReplica(on); on < 0 {
				return fmt.Errorf("worker %d: no worker left: %w", r, err)
			}
			tasks = append(j.psTasks(), workerTask(on))
			continue
		}
		if err == nil {
			j.mu.Lock()
			j.losses = append(j.losses, loss)
			j.mu.Unlock()
			err = j.afterStep(ctx, j.steps.Add(1))
		} else if j.rec != nil && j.lostPS(err) {
			j.lost.Add(1)
		}
		j.rec.leave()
		if err != nil && j.rec != nil && j.lostPS(err) {
			if err := j.recoverFrom(ctx, gen, err); err != nil {
				return fmt.Errorf("worker %d: %w", r, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("worker %d: %w", r, err)
		}
	}
	if err := cleanup.wait(); !j.forgivable(err) {
		return fmt.Errorf("worker %d: %w", r, err)
	}
	return nil
}

// background runs one function at a time on a goroutine of its own.
type background struct {
	done chan error
	busy bool
}

// start runs f; the previous function must have been waited for.
func (b *background) start(f func() error) {
	if b.done == nil {
		b.done = make(chan error, 1)
	}
	b.busy = true
	go func() { b.done <- f() }()
}

// wait returns the error of the function started last, once it has
// ended, or nil when none runs.
func (b *background) wait() error {
	if !b.busy {
		return nil
	}
	b.busy = false
	return <-b.done
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
	r := max(j.liveReplica(0), 0)
	tasks := append(j.psTasks(), workerTask(r))
	for i := 0; i < held.Len(); i += B {
		b := clicks.Batch{IDs: held.IDs[i*F : (i+B)*F], Labels: held.Labels[i : i+B]}
		step := j.nextStep.Add(1)
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
func (j *Job) Close(ctx context.Context) error { return j.d.Close(ctx) }

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
