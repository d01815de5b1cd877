package train

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire/tfpb"
)

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
	// before, when set, runs as each step of replica r begins.
	before func(r int)
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
	out handlers.Fetched
}

func (r *fakeReplica) Next(context.Context) error {
	if r.m.pace > 0 {
		time.Sleep(r.m.pace)
	}
	return nil
}

func (r *fakeReplica) Step(ctx context.Context, on int, step int64) (float64, error) {
	if r.m.before != nil {
		r.m.before(r.r)
	}
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

func (m *fakeModel) Bind(s *Session) { m.s = s }

// newFakeSession returns a session of steps steps per replica training a
// fakeModel over d.
func newFakeSession(d *driver.Driver, ps, workers, steps int) (*Session, *fakeModel) {
	m := &fakeModel{}
	s := NewSession(d, m, Options{PS: ps, Workers: workers, Steps: steps})
	return s, m
}
