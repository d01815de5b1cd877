package lr

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/train"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// ErrNoHashEmbedding is returned by ExportStream for a job whose
// embedding is a fixed table: the change stream is of embedding variables.
var ErrNoHashEmbedding = errors.New("the change stream needs --embedding hash")

// A StreamExporter runs, on every ps, KvResourceStreamExport of its part
// of the hash embedding (package ops): the next version of the change
// stream in the ps's stream directory. Safe for concurrent use.
type StreamExporter struct {
	j  *Model
	mu sync.Mutex
	// graphs are the export graphs by ps, registered for tasks (a
	// rebuild after a lost task registers them again).
	graphs []driver.Graph
	tasks  *train.Tasks
}

// NewStreamExporter returns the job's exporter.
func (j *Model) NewStreamExporter() (*StreamExporter, error) {
	if !j.cfg.hash() {
		return nil, ErrNoHashEmbedding
	}
	return &StreamExporter{j: j}, nil
}

// Export exports every ps's changes as of globalStep, inFlight being the
// steps the updates still in flight may be older by.
func (e *StreamExporter) Export(ctx context.Context, globalStep, inFlight int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	j := e.j
	if e.tasks != j.tasks {
		e.graphs, e.tasks = nil, j.tasks
		for s := range j.cfg.PS {
			g, err := j.tasks.Register(ctx, task(j.plan.ps[s]), j.plan.streamGraph(s, inFlight))
			if err != nil {
				return fmt.Errorf("export the change stream: %w", err)
			}
			e.graphs = append(e.graphs, g)
		}
	}
	parts := make([]driver.Partition, len(e.graphs))
	for s, g := range e.graphs {
		parts[s] = driver.Partition{Graph: g, Feeds: []handlers.Feed{{Key: j.plan.ckptLink(s, "stream/global_step:0").key(),
			Tensor: wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes([]int64{globalStep})}}}}
	}
	if err := j.runOnPS(ctx, parts...); err != nil {
		return fmt.Errorf("export the change stream at step %d: %w", globalStep, err)
	}
	return nil
}

// streamGraph exports ps s's part of the hash embedding at the fed
// global step.
func (p *plan) streamGraph(s int, inFlight int64) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, _ := p.variables(b, s)
	step := b.recv("stream/global_step", p.ckptLink(s, "stream/global_step:0"), wire.DTInt64, true)
	b.op("stream/export", "KvResourceStreamExport", attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64),
		"Tstep": typeAttr(wire.DTInt64), "steps_in_flight": intAttr(inFlight)}, table, step)
	return &b.def
}
