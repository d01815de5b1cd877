package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/starwire/starwire/cmd/starwire/internal/lr"
	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/train"
)

// A trainJob is train's model and the train.Session that trains it: the
// session owns the run's life (failover, recovery, hooks), the model its
// graphs, data and evaluation.
type trainJob struct {
	*lr.Model
	s   *train.Session
	cfg lr.Config
	// stats returns the RPCs of the whole run (the driver's and those the
	// tasks make to each other), and taskStats what a task's calls moved,
	// to and from it; by default the driver's alone are counted.
	stats     func() handlers.Stats
	taskStats func(task string) handlers.Stats
}

// A trainProgress is a periodic report of a running job.
type trainProgress struct {
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
	// train.Session.RecoverTasks), and WaitingFor how long it has waited.
	Waiting    string
	WaitingFor time.Duration
}

// A trainSummary is a finished job's outcome.
type trainSummary struct {
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
	// LostSteps failed with a task that was lost; Steps does not count
	// them.
	LostSteps int64
	// UndoneSteps are global steps a recovery from a lost parameter
	// server undid: those since the checkpoint it restored, or all of
	// them without one. Steps counts them; under StopAtStep they were
	// trained again.
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
func (s *trainSummary) ExamplesPerSec() float64 { return float64(s.Examples) / s.Elapsed.Seconds() }

// newTrainJob makes the model of cfg over d and the session that trains
// it; stats, when not nil, returns the RPCs of the whole run.
func newTrainJob(cfg lr.Config, d *driver.Driver, stats func() handlers.Stats) (*trainJob, error) {
	m, err := lr.New(cfg, d)
	if err != nil {
		return nil, err
	}
	s := train.NewSession(d, m, m.Options())
	if stats == nil {
		stats = d.Stats
	}
	return &trainJob{Model: m, s: s, cfg: cfg, stats: stats, taskStats: d.TaskStats}, nil
}

// run evaluates the held-out set, trains every worker through the
// session while reporting progress, and evaluates again.
func (j *trainJob) run(ctx context.Context, progress func(trainProgress)) (*trainSummary, error) {
	sum := &trainSummary{}
	sum.BayesLoss, sum.BaseRateLoss = j.Floors()
	var err error
	if sum.InitialLoss, _, err = j.Evaluate(ctx); err != nil {
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
	if sum.FinalLoss, sum.Accuracy, err = j.Evaluate(ctx); err != nil {
		return nil, fmt.Errorf("evaluate after training: %w", err)
	}
	return sum, nil
}

// psStats returns what each parameter server's calls have moved so far.
func (j *trainJob) psStats() []handlers.Stats {
	tasks := j.s.PSTasks()
	out := make([]handlers.Stats, len(tasks))
	for s, task := range tasks {
		out[s] = j.taskStats(task)
	}
	return out
}

// progress turns the session's reports into the job's, for progress;
// nil reports nothing.
func (j *trainJob) progress(progress func(trainProgress)) func(train.Progress) {
	batch := int64(j.cfg.BatchSize)
	return func(p train.Progress) {
		if progress == nil {
			return
		}
		progress(trainProgress{
			Waiting: p.Waiting, WaitingFor: p.WaitingFor,
			Elapsed: p.Elapsed, Steps: p.Steps, Examples: p.Done * batch, TotalSteps: j.cfg.TotalSteps(),
			ExamplesPerSec: p.PerSec(p.DoneInInterval * batch),
			RPCsPerSec:     p.PerSec(p.Calls),
			MBPerSec:       p.PerSec(p.Bytes) / 1e6,
			Loss:           p.Loss,
		})
	}
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
