package lr

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/starwire/starwire/handlers"
	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Checkpoints are TensorFlow's sharded Saver's: each parameter server
// saves its shard with SaveV2 into "<prefix>_temp/part-0000s-of-0000N",
// then parameter server 0 merges the parts into "<prefix>" with
// MergeV2Checkpoints. The table is saved as slices of one partitioned
// variable "embedding" of shape [Vocab, EmbeddingDim] (and its Adagrad
// accumulator "embedding/Adagrad"), shard s's rows at the offset of the
// rows of the shards before it, as a PartitionedVariable of TensorFlow is
// saved; "global_step" holds the job's global step.
//
// As with TensorFlow's "mod" partition strategy, the row of id i is row
// i / N of shard i mod N: a checkpoint's row order depends on the number
// of shards N it was saved with. Restore reads each shard's slice
// directly when the job has N parameter servers, and otherwise reads the
// whole table on each server and gathers the rows of its ids.

// Names of the saved tensors, as a TensorFlow job names them.
const (
	ckptTable      = "embedding"
	ckptAccum      = "embedding/Adagrad"
	ckptGlobalStep = "global_step"
	// CheckpointBasename is the prefix's base name in the checkpoint
	// directory, followed by "-<global step>".
	CheckpointBasename = "model.ckpt"
)

// ErrNoCheckpoint is returned by Restore when the directory holds no
// checkpoint; it is checkpoint.ErrNoCheckpoint.
var ErrNoCheckpoint = checkpoint.ErrNoCheckpoint

// ckptState is the model's checkpoint graphs, registered on first use, and
// its global step.
type ckptState struct {
	mu      sync.Mutex
	save    []driver.Graph // by ps
	merge   driver.Graph   // on ps 0
	restore []driver.Graph // by ps, for restoreFrom's shard count
	// restoreFrom is the shard count of the checkpoint the restore graphs
	// read.
	restoreFrom int
	// incrSave and incrApply are the increments' graphs, by ps
	// (incremental.go).
	incrSave, incrApply []driver.Graph
}

// GlobalStep is the steps done, by all workers together, since the
// model was initialized: those of a restored checkpoint and this run's
// (its session's).
func (m *Model) GlobalStep() int64 { return m.s.GlobalStep() }

// SetGlobalStep sets the global step to n, as Restore does.
func (m *Model) SetGlobalStep(n int64) { m.s.SetGlobalStep(n) }

// CheckpointPrefix is the prefix of the checkpoint of globalStep in dir.
func CheckpointPrefix(dir string, globalStep int64) string {
	return filepath.Join(dir, CheckpointBasename+"-"+strconv.FormatInt(globalStep, 10))
}

// Save saves the model as of globalStep into dir and keeps the newest
// keep checkpoints of dir (keep <= 0 keeps all), returning the new
// checkpoint's prefix. Every parameter server must be able to write in
// dir (its checkpoint directory covers it), and dir must be this
// process's too: the state file is written here.
func (m *Model) Save(ctx context.Context, dir string, globalStep int64, keep int) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	m.ckpt.mu.Lock()
	defer m.ckpt.mu.Unlock()
	if m.ckpt.save == nil {
		if err := m.registerSave(ctx); err != nil {
			return "", fmt.Errorf("save checkpoint: %w", err)
		}
	}
	prefix := CheckpointPrefix(dir, globalStep)
	parts := make([]driver.Partition, len(m.ckpt.save))
	for s, g := range m.ckpt.save {
		feeds := []handlers.Feed{{Key: m.plan.ckptLink(s, "save/prefix:0").key(), Tensor: stringTensor(prefix)}}
		if s == 0 || m.cfg.hash() {
			feeds = append(feeds, handlers.Feed{Key: m.plan.ckptLink(s, "save/global_step:0").key(),
				Tensor: wire.Tensor{DType: wire.DTInt64, Data: tensor.Bytes([]int64{globalStep})}})
		}
		parts[s] = driver.Partition{Graph: g, Feeds: feeds}
	}
	if err := m.runOnPS(ctx, parts...); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", prefix, err)
	}
	merge := driver.Partition{Graph: m.ckpt.merge, Feeds: []handlers.Feed{{Key: m.plan.ckptLink(0, "merge/prefix:0").key(), Tensor: stringTensor(prefix)}}}
	if err := m.runOnPS(ctx, merge); err != nil {
		return "", fmt.Errorf("merge checkpoint %s: %w", prefix, err)
	}
	if err := checkpoint.Keep(dir, prefix, keep); err != nil {
		return "", fmt.Errorf("save checkpoint %s: %w", prefix, err)
	}
	return prefix, nil
}

// runOnPS runs parts as a step of their own and cleans it up.
func (m *Model) runOnPS(ctx context.Context, parts ...driver.Partition) error {
	step := m.s.NextStepID()
	err := m.d.RunPartitions(ctx, step, parts...)
	if cerr := m.d.CleanupStep(ctx, step, m.psTasks()...); err == nil {
		err = cerr
	}
	return err
}

// registerSave registers the save graphs once, the first save's: a
// Saver's graph is built once and fed each save's prefix.
func (m *Model) registerSave(ctx context.Context) error {
	var save []driver.Graph
	for s := range m.cfg.PS {
		g, err := m.tasks.Register(ctx, task(m.plan.ps[s]), m.plan.saveGraph(s))
		if err != nil {
			return err
		}
		save = append(save, g)
	}
	merge, err := m.tasks.Register(ctx, task(m.plan.ps[0]), m.plan.mergeGraph())
	if err != nil {
		return err
	}
	m.ckpt.save, m.ckpt.merge = save, merge
	return nil
}

// Restore restores the model from dir's newest checkpoint, sets the model's
// global step to the checkpoint's and returns it with the checkpoint's
// prefix. A dir with no checkpoint is an error wrapping ErrNoCheckpoint.
// The checkpoint is opened in this process too (to learn its global step
// and shard count), so dir must be visible here as on the parameter
// servers: true of the local cluster and of a shared directory. Call it
// after the session's Setup and before its Run.
func (m *Model) Restore(ctx context.Context, dir string) (globalStep int64, prefix string, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return 0, "", fmt.Errorf("restore checkpoint: %w", err)
	}
	prefix, err = checkpoint.Latest(dir)
	if err != nil {
		return 0, "", fmt.Errorf("restore checkpoint: %w", err)
	}
	shards, globalStep, err := m.inspect(prefix)
	if err != nil {
		return 0, "", fmt.Errorf("restore checkpoint %s: %w", prefix, err)
	}
	m.ckpt.mu.Lock()
	defer m.ckpt.mu.Unlock()
	if m.ckpt.restore == nil || m.ckpt.restoreFrom != shards {
		var gs []driver.Graph
		for s := range m.cfg.PS {
			g, err := m.tasks.Register(ctx, task(m.plan.ps[s]), m.plan.restoreGraph(s, shards))
			if err != nil {
				return 0, "", fmt.Errorf("restore checkpoint %s: %w", prefix, err)
			}
			gs = append(gs, g)
		}
		m.ckpt.restore, m.ckpt.restoreFrom = gs, shards
	}
	parts := make([]driver.Partition, len(m.ckpt.restore))
	for s, g := range m.ckpt.restore {
		parts[s] = driver.Partition{Graph: g, Feeds: []handlers.Feed{{Key: m.plan.ckptLink(s, "restore/prefix:0").key(), Tensor: stringTensor(prefix)}}}
	}
	if err := m.runOnPS(ctx, parts...); err != nil {
		return 0, "", fmt.Errorf("restore checkpoint %s: %w", prefix, err)
	}
	m.SetGlobalStep(globalStep)
	return globalStep, prefix, nil
}

// inspect checks that the checkpoint under prefix holds this job's model
// and returns the number of shards its table was saved in and its global
// step.
func (m *Model) inspect(prefix string) (shards int, globalStep int64, err error) {
	r, err := checkpoint.Open(prefix)
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	if m.cfg.hash() {
		// Any number of servers restores any number's pieces.
		err, shards = m.inspectKv(r), m.cfg.PS
	} else {
		shards, err = m.inspectTable(r)
	}
	if err != nil {
		return 0, 0, err
	}
	t, err := r.Read(ckptGlobalStep)
	if err != nil {
		return 0, 0, err
	}
	if t.DType != wire.DTInt64 || len(t.Data) != 8 {
		return 0, 0, fmt.Errorf("%q is %v%v, want an int64 scalar: %w", ckptGlobalStep, t.DType, t.Shape, checkpoint.ErrMismatch)
	}
	return shards, tensor.View[int64](t.Data)[0], nil
}

// inspectTable checks that r holds the fixed table of the job's shape
// and returns the number of shards it was saved in.
func (m *Model) inspectTable(r *checkpoint.Reader) (shards int, err error) {
	want := []int64{int64(m.cfg.Vocab), int64(m.cfg.EmbeddingDim)}
	for _, name := range []string{ckptTable, ckptAccum} {
		e, ok := r.Entry(name)
		if !ok {
			return 0, fmt.Errorf("no tensor %q: %w", name, checkpoint.ErrNotFound)
		}
		if e.DType != wire.DTFloat || len(e.Shape) != 2 || e.Shape[0] != want[0] || e.Shape[1] != want[1] {
			return 0, fmt.Errorf("%q is %v%v, the job's table %v%v: %w", name, e.DType, e.Shape, wire.DTFloat, want, checkpoint.ErrMismatch)
		}
		n, err := modShards(e, m.cfg.Vocab)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", name, err)
		}
		if shards != 0 && n != shards {
			return 0, fmt.Errorf("%q is saved in %d shards, %q in %d: %w", name, n, ckptTable, shards, checkpoint.ErrMismatch)
		}
		shards = n
	}
	return shards, nil
}

// modShards returns the number of shards e was saved in, checking that
// its slices are those of the "mod" layout: shard s's rows at the sum of
// the rows of the shards before it. A tensor saved whole is one shard.
func modShards(e checkpoint.Entry, vocab int) (int, error) {
	if e.Slices == nil {
		return 1, nil
	}
	n := len(e.Slices)
	starts := map[int64]int64{}
	for _, s := range e.Slices {
		if len(s.Start) != 2 || s.Length[1] != checkpoint.FullLength {
			return 0, fmt.Errorf("slice %v is not a block of rows: %w", s, checkpoint.ErrMismatch)
		}
		starts[s.Start[0]] = s.Length[0]
	}
	c := Config{Vocab: vocab, PS: n}
	var off int64
	for s := range n {
		if rows, ok := starts[off]; !ok || rows != c.shardRows(s) {
			return 0, fmt.Errorf("%d slices are not %d shards of %d ids: %w", n, n, vocab, checkpoint.ErrMismatch)
		}
		off += c.shardRows(s)
	}
	return n, nil
}

// ckptLink is the driver's feed to parameter server s of a checkpoint
// graph; the driver feeds as replica 0's client.
func (p *plan) ckptLink(s int, tensor string) link {
	c, inc := p.client(0)
	return link{tensor: tensor, src: c, srcInc: inc, dst: p.ps[s]}
}

// shardOffset is the first row of shard s in the whole table.
func (c Config) shardOffset(s int) int64 {
	var off int64
	for i := range s {
		off += c.shardRows(i)
	}
	return off
}

// sliceSpec is the shape_and_slices of shard s's rows of the table.
func (c Config) sliceSpec(s int) string {
	return fmt.Sprintf("%d %d %d,%d:-", c.Vocab, c.EmbeddingDim, c.shardOffset(s), c.shardRows(s))
}

// saveGraph saves parameter server s's shard into
// ShardedFilename(StringJoin(prefix, "_temp/part"), s, PS), prefix fed; on
// server 0 with the fed global step.
func (p *plan) saveGraph(s int) *tfpb.GraphDef {
	if p.cfg.hash() {
		return p.saveKvGraph(s)
	}
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	prefix := b.recv("save/prefix", p.ckptLink(s, "save/prefix:0"), wire.DTString, true)
	file := p.shardFile(b, "save", prefix, s)
	spec := p.cfg.sliceSpec(s)
	names, specs := []string{ckptTable, ckptAccum}, []string{spec, spec}
	read := func(name, v string) string {
		return b.op(name, "ReadVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, v)
	}
	inputs := []string{file, "", "", read("save/table", table), read("save/accum", accum)}
	dtypes := []wire.DataType{wire.DTFloat, wire.DTFloat}
	if s == 0 {
		names, specs = append(names, ckptGlobalStep), append(specs, "")
		inputs = append(inputs, b.recv("save/global_step", p.ckptLink(0, "save/global_step:0"), wire.DTInt64, true))
		dtypes = append(dtypes, wire.DTInt64)
	}
	inputs[1], inputs[2] = b.constStrings("save/tensor_names", names...), b.constStrings("save/shape_and_slices", specs...)
	b.op("save", "SaveV2", attrs{"dtypes": typeListAttr(dtypes...)}, inputs...)
	return &b.def
}

// shardFile adds the name of shard s's part of the checkpoint prefix.
func (p *plan) shardFile(b *builder, scope, prefix string, s int) string {
	base := b.op(scope+"/part_base_"+itoa(s), "StringJoin", attrs{"N": intAttr(2), "separator": strAttr("")},
		prefix, b.constString(scope+"/temp_part_"+itoa(s), "_temp/part"))
	return b.op(scope+"/sharded_filename_"+itoa(s), "ShardedFilename", nil,
		base, b.constInt32Scalar(scope+"/shard_"+itoa(s), int32(s)), b.constInt32Scalar(scope+"/num_shards_"+itoa(s), int32(p.cfg.PS)))
}

// mergeGraph merges the parts of every server into the fed prefix, on
// server 0, removing the parts' directory.
func (p *plan) mergeGraph() *tfpb.GraphDef {
	b := newBuilder(p.ps[0])
	prefix := b.recv("merge/prefix", p.ckptLink(0, "merge/prefix:0"), wire.DTString, true)
	var files []string
	for s := range p.cfg.PS {
		files = append(files, p.shardFile(b, "merge", prefix, s))
	}
	all := b.op("merge/prefixes", "Pack", attrs{"T": typeAttr(wire.DTString), "N": intAttr(int64(len(files))), "axis": intAttr(0)}, files...)
	b.op("merge", "MergeV2Checkpoints", attrs{"delete_old_dirs": boolAttr(true)}, all, prefix)
	return &b.def
}

// restoreGraph restores parameter server s's table and accumulator from
// the fed prefix of a checkpoint saved in shards shards: its own slice
// when shards is the job's PS, else the rows of its ids gathered from the
// whole table.
func (p *plan) restoreGraph(s, shards int) *tfpb.GraphDef {
	if p.cfg.hash() {
		return p.restoreKvGraph(s)
	}
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	prefix := b.recv("restore/prefix", p.ckptLink(s, "restore/prefix:0"), wire.DTString, true)
	spec := p.cfg.sliceSpec(s)
	if shards != p.cfg.PS {
		spec = ""
	}
	restored := b.op("restore", "RestoreV2", attrs{"dtypes": typeListAttr(wire.DTFloat, wire.DTFloat)},
		prefix, b.constStrings("restore/tensor_names", ckptTable, ckptAccum), b.constStrings("restore/shape_and_slices", spec, spec))
	tv, av := restored+":0", restored+":1"
	if shards != p.cfg.PS {
		rows := p.savedRows(b, s, shards)
		axis := b.constInt32Scalar("restore/axis", 0)
		gather := func(name, x string) string {
			return b.op(name, "GatherV2", attrs{"Tparams": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64), "Taxis": typeAttr(wire.DTInt32)}, x, rows, axis)
		}
		tv, av = gather("restore/table", tv), gather("restore/accum", av)
	}
	b.op("restore/table/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, table, tv)
	b.op("restore/accum/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, accum, av)
	return &b.def
}

// savedRows adds the rows, in a table saved in shards shards, of server
// s's ids s, s+PS, ...: id i is row i / shards of shard i mod shards.
func (p *plan) savedRows(b *builder, s, shards int) string {
	int64Op := func(name, op string, in ...string) string {
		return b.op(name, op, attrs{"T": typeAttr(wire.DTInt64)}, in...)
	}
	ids := b.op("restore/ids", "Range", attrs{"Tidx": typeAttr(wire.DTInt64)},
		b.constInt64("restore/ids/start", int64(s)), b.constInt64("restore/ids/limit", int64(p.cfg.Vocab)), b.constInt64("restore/ids/delta", int64(p.cfg.PS)))
	n := b.constInt64("restore/saved_shards", int64(shards))
	saved := Config{Vocab: p.cfg.Vocab, PS: shards}
	offsets := make([]int64, shards)
	for i := range shards {
		offsets[i] = saved.shardOffset(i)
	}
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTInt64), TensorShape: tensor.ShapeToProto([]int64{int64(shards)}), Int64Val: offsets}
	off := b.op("restore/offsets", "Const", attrs{"dtype": typeAttr(wire.DTInt64), "value": tensorAttr(t)})
	start := b.op("restore/shard_start", "GatherV2", attrs{"Tparams": typeAttr(wire.DTInt64), "Tindices": typeAttr(wire.DTInt64), "Taxis": typeAttr(wire.DTInt32)},
		off, int64Op("restore/shard", "FloorMod", ids, n), b.constInt32Scalar("restore/offsets/axis", 0))
	return int64Op("restore/rows", "AddV2", start, int64Op("restore/row", "FloorDiv", ids, n))
}

// constStrings adds a Const string vector.
func (b *builder) constStrings(name string, vals ...string) string {
	sv := make([][]byte, len(vals))
	for i, v := range vals {
		sv[i] = []byte(v)
	}
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTString), TensorShape: tensor.ShapeToProto([]int64{int64(len(vals))}), StringVal: sv}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTString), "value": tensorAttr(t)})
}

// constString adds a Const string scalar.
func (b *builder) constString(name, v string) string {
	t := &tfpb.TensorProto{Dtype: tfpb.DataType(wire.DTString), TensorShape: &tfpb.TensorShapeProto{}, StringVal: [][]byte{[]byte(v)}}
	return b.op(name, "Const", attrs{"dtype": typeAttr(wire.DTString), "value": tensorAttr(t)})
}

func typeListAttr(dts ...wire.DataType) *tfpb.AttrValue {
	l := make([]tfpb.DataType, len(dts))
	for i, dt := range dts {
		l[i] = tfpb.DataType(dt)
	}
	return &tfpb.AttrValue{Value: &tfpb.AttrValue_List{List: &tfpb.AttrValue_ListValue{Type: l}}}
}

// stringTensor is a string scalar.
func stringTensor(s string) wire.Tensor {
	return wire.Tensor{DType: wire.DTString, Data: wire.AppendStrings(nil, [][]byte{[]byte(s)})}
}
