package lr

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/train"
)

// job is a Model and the train.Session that trains it, wired as the
// command wires them.
type job struct {
	*Model
	s *train.Session
	// stats returns the RPCs of the whole run, and taskStats those of a
	// task's calls; by default the driver's.
	stats     func() handlers.Stats
	taskStats func(task string) handlers.Stats
}

// newJob makes the model of cfg over d and its session.
func newJob(t testing.TB, cfg Config, d *driver.Driver) *job {
	t.Helper()
	m, err := New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	s := train.NewSession(d, m, m.Options())
	return &job{Model: m, s: s, stats: d.Stats, taskStats: d.TaskStats}
}

// summary is a run's outcome, as the tests check it.
type summary struct {
	Steps, LostSteps, UndoneSteps, GlobalStep int64
	Elapsed                                   time.Duration
	InitialLoss, FinalLoss, Accuracy          float64
	FirstTrainLoss, LastTrainLoss             float64
	BayesLoss, BaseRateLoss                   float64
	Calls, Bytes                              int64
	PSBytes                                   []int64
}

func (s *summary) ExamplesPerSec(batch int) float64 {
	return float64(s.Steps*int64(batch)) / s.Elapsed.Seconds()
}

// run evaluates the held-out set, runs the session and evaluates again.
func (j *job) run(ctx context.Context) (*summary, error) {
	sum := &summary{}
	sum.BayesLoss, sum.BaseRateLoss = j.Floors()
	var err error
	if sum.InitialLoss, _, err = j.Evaluate(ctx); err != nil {
		return nil, fmt.Errorf("evaluate before training: %w", err)
	}
	psTasks := j.s.PSTasks()
	before, psBefore := j.stats(), make([]handlers.Stats, len(psTasks))
	for s, task := range psTasks {
		psBefore[s] = j.taskStats(task)
	}
	start := time.Now()
	if err := j.s.Run(ctx); err != nil {
		return nil, err
	}
	sum.Elapsed = time.Since(start)
	after := j.stats()
	sum.Calls, sum.Bytes = after.Calls-before.Calls, after.Bytes-before.Bytes
	for s, task := range psTasks {
		sum.PSBytes = append(sum.PSBytes, j.taskStats(task).Bytes-psBefore[s].Bytes)
	}
	sum.Steps, sum.LostSteps = j.s.Steps()
	sum.UndoneSteps, sum.GlobalStep = j.s.UndoneSteps(), j.s.GlobalStep()
	losses := j.s.Losses(0)
	tenth := max(len(losses)/10, 1)
	sum.FirstTrainLoss, sum.LastTrainLoss = meanOf(losses[:min(tenth, len(losses))]), meanOf(losses[max(len(losses)-tenth, 0):])
	if sum.FinalLoss, sum.Accuracy, err = j.Evaluate(ctx); err != nil {
		return nil, fmt.Errorf("evaluate after training: %w", err)
	}
	return sum, nil
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}
