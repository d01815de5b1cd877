package lr

import (
	"fmt"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// Checkpoints of the hash embedding are DeepRec's: server s saves its
// embedding variable as "embedding/part_s" and its accumulator as
// "embedding/part_s/Adagrad" (the tensors -keys, -values, -freqs,
// -versions, -partition_offset, ...: see package ops), SaveV2 taking one
// snapshot of the table for both; server 0 saves "global_step" too.
// Before it saves, each server evicts the rows not updated within
// StepsToLive of the global step (KvResourceEvict), DeepRec's eviction at
// save. A restore imports into server s of any number the ids
// embedding.PartitionOf puts there, from every piece
// (KvResourceImportV2), the lookups' rule too: the servers may number
// otherwise than those that saved.

// saveKvGraph is saveGraph with the hash embedding.
func (p *plan) saveKvGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	prefix := b.recv("save/prefix", p.ckptLink(s, "save/prefix:0"), wire.DTString, true)
	step := b.recv("save/global_step", p.ckptLink(s, "save/global_step:0"), wire.DTInt64, true)
	evict := b.op("save/evict", "KvResourceEvict", attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64), "Tstep": typeAttr(wire.DTInt64)}, table, step)
	names := []string{tableName(s), accumName(s)}
	tensors := []string{table, accum}
	dtypes := []wire.DataType{wire.DTResource, wire.DTResource}
	if s == 0 {
		names, tensors, dtypes = append([]string{ckptGlobalStep}, names...), append([]string{step}, tensors...), append([]wire.DataType{wire.DTInt64}, dtypes...)
	}
	inputs := []string{p.shardFile(b, "save", prefix, s), b.constStrings("save/tensor_names", names...), b.constStrings("save/shape_and_slices", make([]string, len(names))...)}
	inputs = append(append(inputs, tensors...), "^"+evict)
	b.op("save", "SaveV2", attrs{"dtypes": typeListAttr(dtypes...), "has_ev": boolAttr(s == 0)}, inputs...)
	return &b.def
}

// restoreKvGraph is restoreGraph with the hash embedding: the table's
// import, then its accumulator's, which sets the slot of every row.
func (p *plan) restoreKvGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	prefix := b.recv("restore/prefix", p.ckptLink(s, "restore/prefix:0"), wire.DTString, true)
	defaults, accumInit, empty := p.kvInputs(b, "restore/")
	imp := func(slot int64) attrs {
		a := p.kvAttrs(slot)
		a["partition_id"], a["partition_num"] = intAttr(int64(s)), intAttr(int64(p.cfg.PS))
		return a
	}
	b.op("restore/table", "KvResourceImportV2", imp(0), prefix, table, table, defaults, b.constString("restore/table_name", tableName(s)), empty)
	b.op("restore/accum", "KvResourceImportV2", imp(1), prefix, accum, table, accumInit, b.constString("restore/accum_name", accumName(s)), empty, "^restore/table")
	return &b.def
}

// inspectKv checks that the checkpoint r holds a hash embedding of the
// job's width.
func (m *Model) inspectKv(r *checkpoint.Reader) error {
	for _, name := range []string{tableName(0) + "-values", accumName(0) + "-values"} {
		e, ok := r.Entry(name)
		if !ok {
			return fmt.Errorf("no tensor %q (a checkpoint of the hash embedding?): %w", name, checkpoint.ErrNotFound)
		}
		if e.DType != wire.DTFloat || len(e.Shape) != 2 || e.Shape[1] != int64(m.cfg.EmbeddingDim) {
			return fmt.Errorf("%q is %v%v, the job's rows %v[n,%d]: %w", name, e.DType, e.Shape, wire.DTFloat, m.cfg.EmbeddingDim, checkpoint.ErrMismatch)
		}
	}
	return nil
}
