package lr

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Increments of the hash embedding (train.IncrementalCheckpointer): each
// server saves with IncrSave the rows of its variable and accumulator
// changed since a version, under the names of a full checkpoint, into
// "<prefix>_temp/part-0000s-of-0000N", server 0 the global step too; then
// server 0 merges the parts into prefix, as a full save does. A restore
// applies an increment with KvResourceIncrImport on each server, the
// accumulator's import before the table's, over the rows a full restore
// left. The fixed table saves no increments: its checkpoints are full.

// SaveIncrement saves into prefix the rows changed since version since,
// as of globalStep, as an increment of the full checkpoint base following
// prev (base names of their prefixes). Every parameter server must be
// able to write prefix's directory.
func (j *Model) SaveIncrement(ctx context.Context, prefix string, globalStep, since int64, base, prev string) error {
	if !j.cfg.hash() {
		return fmt.Errorf("save increment %s: the fixed table saves full checkpoints alone (increments are of --embedding hash)", prefix)
	}
	j.ckpt.mu.Lock()
	defer j.ckpt.mu.Unlock()
	if err := j.registerIncrSave(ctx); err != nil {
		return fmt.Errorf("save increment %s: %w", prefix, err)
	}
	scalar := func(v int64) wire.Tensor {
		return wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes([]int64{v})}
	}
	parts := make([]driver.Partition, len(j.ckpt.incrSave))
	for s, g := range j.ckpt.incrSave {
		feeds := []handlers.Feed{
			{Key: j.plan.ckptLink(s, "incr/prefix:0").key(), Tensor: stringTensor(prefix)},
			{Key: j.plan.ckptLink(s, "incr/base:0").key(), Tensor: stringTensor(base)},
			{Key: j.plan.ckptLink(s, "incr/prev:0").key(), Tensor: stringTensor(prev)},
			{Key: j.plan.ckptLink(s, "incr/since:0").key(), Tensor: scalar(since)},
		}
		if s == 0 {
			feeds = append(feeds, handlers.Feed{Key: j.plan.ckptLink(s, "incr/global_step:0").key(), Tensor: scalar(globalStep)})
		}
		parts[s] = driver.Partition{Graph: g, Feeds: feeds}
	}
	if err := j.runOnPS(ctx, parts...); err != nil {
		return fmt.Errorf("save increment %s: %w", prefix, err)
	}
	merge := driver.Partition{Graph: j.ckpt.merge, Feeds: []handlers.Feed{{Key: j.plan.ckptLink(0, "merge/prefix:0").key(), Tensor: stringTensor(prefix)}}}
	if err := j.runOnPS(ctx, merge); err != nil {
		return fmt.Errorf("merge increment %s: %w", prefix, err)
	}
	return nil
}

// registerIncrSave registers the increments' save graphs, and the merge
// graph, once; j.ckpt.mu is held.
func (j *Model) registerIncrSave(ctx context.Context) error {
	if j.ckpt.save == nil {
		if err := j.registerSave(ctx); err != nil {
			return err
		}
	}
	if j.ckpt.incrSave != nil {
		return nil
	}
	gs, err := j.registerOnPS(ctx, j.plan.incrSaveGraph)
	j.ckpt.incrSave = gs
	return err
}

// registerOnPS registers graph(s) on each server s.
func (j *Model) registerOnPS(ctx context.Context, graph func(s int) *tfpb.GraphDef) ([]driver.Graph, error) {
	var gs []driver.Graph
	for s := range j.cfg.PS {
		g, err := j.tasks.Register(ctx, task(j.plan.ps[s]), graph(s))
		if err != nil {
			return nil, err
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// ApplyIncrement applies the increment under prefix to the model a
// Restore restored (and the increments before it), sets the job's global
// step to the increment's and returns it. An increment of another full
// checkpoint, or out of order, is refused by the servers before anything
// changes (FailedPrecondition).
func (j *Model) ApplyIncrement(ctx context.Context, prefix string) (int64, error) {
	if !j.cfg.hash() {
		return 0, fmt.Errorf("apply increment %s: the fixed table has no increments", prefix)
	}
	prefix, err := filepath.Abs(prefix)
	if err != nil {
		return 0, fmt.Errorf("apply increment: %w", err)
	}
	step, err := incrementStep(prefix)
	if err != nil {
		return 0, fmt.Errorf("apply increment %s: %w", prefix, err)
	}
	j.ckpt.mu.Lock()
	defer j.ckpt.mu.Unlock()
	if j.ckpt.incrApply == nil {
		if j.ckpt.incrApply, err = j.registerOnPS(ctx, j.plan.incrApplyGraph); err != nil {
			return 0, fmt.Errorf("apply increment %s: %w", prefix, err)
		}
	}
	parts := make([]driver.Partition, len(j.ckpt.incrApply))
	for s, g := range j.ckpt.incrApply {
		parts[s] = driver.Partition{Graph: g, Feeds: []handlers.Feed{{Key: j.plan.ckptLink(s, "incr_apply/prefix:0").key(), Tensor: stringTensor(prefix)}}}
	}
	if err := j.runOnPS(ctx, parts...); err != nil {
		return 0, fmt.Errorf("apply increment %s: %w", prefix, err)
	}
	j.SetGlobalStep(step)
	return step, nil
}

// incrementStep checks that prefix is an increment of the hash embedding
// and returns its global step.
func incrementStep(prefix string) (int64, error) {
	r, err := checkpoint.Open(prefix)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if _, ok := r.Entry(tableName(0) + "-incr_base"); !ok {
		return 0, fmt.Errorf("no tensor %q: not an increment of the hash embedding: %w", tableName(0)+"-incr_base", checkpoint.ErrMismatch)
	}
	t, err := r.Read(ckptGlobalStep)
	if err != nil {
		return 0, err
	}
	if t.DType != wire.DTInt64 || len(t.Data) != 8 {
		return 0, fmt.Errorf("%q is %v%v, want an int64 scalar: %w", ckptGlobalStep, t.DType, t.Shape, checkpoint.ErrMismatch)
	}
	return tensor.View[int64](t.Data)[0], nil
}

// incrSaveGraph saves server s's rows changed since the fed version into
// its part of the fed prefix; on server 0 with the fed global step.
func (p *plan) incrSaveGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	recv := func(name string, dt wire.DataType) string {
		return b.recv("incr/"+name, p.ckptLink(s, "incr/"+name+":0"), dt, true)
	}
	prefix := recv("prefix", wire.DTString)
	base, prev, since := recv("base", wire.DTString), recv("prev", wire.DTString), recv("since", wire.DTInt64)
	names := []string{tableName(s), accumName(s)}
	tensors := []string{table, accum}
	dtypes := []wire.DataType{wire.DTResource, wire.DTResource}
	if s == 0 {
		names, tensors, dtypes = append([]string{ckptGlobalStep}, names...), append([]string{recv("global_step", wire.DTInt64)}, tensors...), append([]wire.DataType{wire.DTInt64}, dtypes...)
	}
	inputs := []string{p.shardFile(b, "incr", prefix, s), b.constStrings("incr/tensor_names", names...), b.constStrings("incr/shape_and_slices", make([]string, len(names))...), base, prev, since}
	b.op("incr", "IncrSave", attrs{"dtypes": typeListAttr(dtypes...)}, append(inputs, tensors...)...)
	return &b.def
}

// incrApplyGraph applies the fed increment to server s's rows: the
// accumulator's import names its rows, the table's applies both.
func (p *plan) incrApplyGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	prefix := b.recv("incr_apply/prefix", p.ckptLink(s, "incr_apply/prefix:0"), wire.DTString, true)
	a := attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64), "partition_id": intAttr(int64(s)), "partition_num": intAttr(int64(p.cfg.PS))}
	b.op("incr_apply/accum", "KvResourceIncrImport", a, prefix, accum, table, b.constString("incr_apply/accum_name", accumName(s)))
	b.op("incr_apply/table", "KvResourceIncrImport", a, prefix, table, table, b.constString("incr_apply/table_name", tableName(s)), "^incr_apply/accum")
	return &b.def
}
