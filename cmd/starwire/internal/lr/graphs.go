package lr

import (
	"fmt"
	"math"

	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// device returns the CPU device of a task.
func device(job string, task int) string {
	return fmt.Sprintf("/job:%s/replica:0/task:%d/device:CPU:0", job, task)
}

// Variable names on parameter server p.
func tableName(p int) string { return "embedding/part_" + itoa(p) }
func accumName(p int) string { return "embedding/part_" + itoa(p) + "/Adagrad" }

// plan names every device, incarnation and rendezvous key of the job's
// partitions, so that graphs and feeds agree.
type plan struct {
	cfg     Config
	ps      []string // devices
	psInc   []uint64
	workers []string
	wInc    []uint64
}

// replica r's client is its own worker task, as in between-graph
// replication, where each worker runs its own master.
func (p *plan) client(r int) (string, uint64) { return p.workers[r], p.wInc[r] }

// Links of replica r's step: the driver (its client) feeds worker r, worker
// r sends parameter server s the ids of its shard and their gradients, and
// s sends back the rows.
func (p *plan) idsLink(r int) link {
	c, inc := p.client(r)
	return link{tensor: "ids:0", src: c, srcInc: inc, dst: p.workers[r]}
}

func (p *plan) labelsLink(r int) link {
	c, inc := p.client(r)
	return link{tensor: "labels:0", src: c, srcInc: inc, dst: p.workers[r]}
}

func (p *plan) shardIDsLink(r, s int) link {
	return link{tensor: "embedding/part_" + itoa(s) + "/ids:0", src: p.workers[r], srcInc: p.wInc[r], dst: p.ps[s]}
}

func (p *plan) rowsLink(r, s int) link {
	return link{tensor: "embedding/part_" + itoa(s) + "/gather:0", src: p.ps[s], srcInc: p.psInc[s], dst: p.workers[r]}
}

func (p *plan) shardGradsLink(r, s int) link {
	return link{tensor: "embedding/part_" + itoa(s) + "/grads:0", src: p.workers[r], srcInc: p.wInc[r], dst: p.ps[s]}
}

// globalStepLink feeds parameter server s, in replica r's step, the
// global step its updates are of: the rows' versions, by which the hash
// embedding evicts.
func (p *plan) globalStepLink(r, s int) link {
	c, inc := p.client(r)
	return link{tensor: "global_step:0", src: c, srcInc: inc, dst: p.ps[s]}
}

// fetch links: worker r to its client.
func (p *plan) fetchLink(r int, tensor string) link {
	c, _ := p.client(r)
	return link{tensor: tensor, src: p.workers[r], srcInc: p.wInc[r], dst: c}
}

// variables adds handles of parameter server s's table and accumulator:
// resource variables, or with the hash embedding embedding variables
// (DeepRec's KvVarHandleOp), the accumulator a slot of the table.
func (p *plan) variables(b *builder, s int) (table, accum string) {
	if p.cfg.hash() {
		a := func() attrs {
			return attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64), "shape": shapeAttr(int64(p.cfg.EmbeddingDim)), "container": strAttr("")}
		}
		ta, aa := a(), a()
		ta["shared_name"], aa["shared_name"] = strAttr(tableName(s)), strAttr(accumName(s))
		return b.op("table", "KvVarHandleOp", ta), b.op("accum", "KvVarHandleOp", aa)
	}
	shape := shapeAttr(p.cfg.shardRows(s), int64(p.cfg.EmbeddingDim))
	table = b.op("table", "VarHandleOp", attrs{"dtype": typeAttr(wire.DTFloat), "shape": shape, "shared_name": strAttr(tableName(s)), "container": strAttr("")})
	accum = b.op("accum", "VarHandleOp", attrs{"dtype": typeAttr(wire.DTFloat), "shape": shape, "shared_name": strAttr(accumName(s)), "container": strAttr("")})
	return table, accum
}

// initGraph sets parameter server s's table as TensorFlow's embedding
// columns initialize theirs, truncated_normal with stddev 1/sqrt(dim),
// and its Adagrad accumulator to the initial value. A table at zeros
// would keep its columns identical (each gets the same gradient, as the
// logit sums them), so that the width would change the traffic and not
// the model.
func (p *plan) initGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	if p.cfg.hash() {
		p.initKv(b, table, accum)
		return &b.def
	}
	rows, dim := p.cfg.shardRows(s), int64(p.cfg.EmbeddingDim)
	init := b.fill("accum_init", p.cfg.InitialAccumulator, rows, dim)
	b.op("table/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, table, p.tableInit(b, s))
	b.op("accum/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, accum, init)
	return &b.def
}

// initKv initializes the hash embedding's table and its accumulator slot
// with DeepRec's InitializeKvVariableOp: a new row starts as row id mod
// defaultRows of a default value matrix drawn as the fixed table's rows
// are, its accumulator at the initial value. Every server draws the same
// matrix, so that an id starts at the same value whatever the servers.
func (p *plan) initKv(b *builder, table, accum string) {
	defaults, accumInit, empty := p.kvInputs(b, "")
	// The slot first: its initial value must be known before the table
	// has rows.
	b.op("accum/init", "InitializeKvVariableOp", p.kvAttrs(1), accum, table, accumInit, empty)
	b.op("table/init", "InitializeKvVariableOp", p.kvAttrs(0), table, table, defaults, empty)
}

// kvInputs adds the values an embedding variable's initialization (or
// import) takes, their names under scope: the default value matrix, the
// accumulator's initial value and the empty key.
func (p *plan) kvInputs(b *builder, scope string) (defaults, accumInit, empty string) {
	dim := p.cfg.EmbeddingDim
	draw := b.op(scope+"default_value/draw", "TruncatedNormal", attrs{"dtype": typeAttr(wire.DTFloat), "T": typeAttr(wire.DTInt32),
		"seed": intAttr(int64(p.cfg.Seed)), "seed2": intAttr(1)}, b.constInt32(scope+"default_value/shape", defaultRows, int32(dim)))
	defaults = b.binary(scope+"default_value", "Mul", draw, b.constFloat(scope+"default_value/stddev", float32(1/math.Sqrt(float64(dim)))))
	return defaults, b.fill(scope+"accum_init", p.cfg.InitialAccumulator, 1, int64(dim)), b.constInt64(scope+"empty_key", -1)
}

// kvAttrs are the attributes of the table's (slotIndex 0) or its
// accumulator's (1) InitializeKvVariableOp and KvResourceImportV2.
func (p *plan) kvAttrs(slotIndex int64) attrs {
	return attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64), "shape": shapeAttr(int64(p.cfg.EmbeddingDim)),
		"slot_num": intAttr(1), "slot_index": intAttr(slotIndex), "emb_index": intAttr(0), "block_num": intAttr(1),
		"filter_freq": intAttr(p.cfg.FilterFreq), "steps_to_live": intAttr(p.cfg.StepsToLive), "default_value_dim": intAttr(defaultRows)}
}

// tableInit adds shard s's initial rows. The draw, seeded by the config's
// seed, is of the whole table, and the shard keeps its ids' rows (s, s+PS,
// ...): an id starts at the same value whatever the servers, so that the
// model does not depend on how many hold it. That costs each server the
// draw of the whole table once, at most what one server alone holds.
func (p *plan) tableInit(b *builder, s int) string {
	dim := p.cfg.EmbeddingDim
	shape := b.constInt32("table_init/shape", int32(p.cfg.Vocab), int32(dim))
	// seed2 is not 0, so that seed 0 too is a fixed seed pair (both 0 draw
	// a random one).
	draw := b.op("table_init/draw", "TruncatedNormal", attrs{"dtype": typeAttr(wire.DTFloat), "T": typeAttr(wire.DTInt32),
		"seed": intAttr(int64(p.cfg.Seed)), "seed2": intAttr(1)}, shape)
	stddev := b.constFloat("table_init/stddev", float32(1/math.Sqrt(float64(dim))))
	all := b.binary("table_init/all", "Mul", draw, stddev)
	if p.cfg.PS == 1 {
		return all
	}
	ids := b.op("table_init/ids", "Range", attrs{"Tidx": typeAttr(wire.DTInt32)},
		b.constInt32Scalar("table_init/first", int32(s)), b.constInt32Scalar("table_init/end", int32(p.cfg.Vocab)),
		b.constInt32Scalar("table_init/stride", int32(p.cfg.PS)))
	return b.op("table_init", "GatherV2", attrs{"Tparams": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt32), "Taxis": typeAttr(wire.DTInt32), "batch_dims": intAttr(0)},
		all, ids, b.constInt32Scalar("table_init/axis", 0))
}

// psGraph is parameter server s's partition of replica r's step, as
// TensorFlow's partitioner cuts a sharded embedding lookup: it receives
// the ids of its shard from worker r, gathers their rows and sends them
// back; with train, it then receives their gradients and applies them
// with Adagrad.
func (p *plan) psGraph(r, s int, train bool) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	ids := b.recv("ids", p.shardIDsLink(r, s), wire.DTInt64, false)
	if p.cfg.hash() {
		p.psKv(b, r, s, table, accum, ids, train)
		return &b.def
	}
	rows := b.op("gather", "ResourceGather", attrs{"dtype": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64)}, table, ids)
	b.send("gather/_send", rows, p.rowsLink(r, s), wire.DTFloat, false)
	if train {
		grads := b.recv("grads", p.shardGradsLink(r, s), wire.DTFloat, false)
		lr := b.constFloat("learning_rate", p.cfg.LearningRate)
		b.op("apply", "ResourceSparseApplyAdagrad", attrs{"T": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64)},
			table, accum, lr, grads, ids)
	}
	return &b.def
}

// psKv is psGraph's gather and update with the hash embedding:
// KvResourceGather (an evaluation's with is_inference, which makes no row
// and counts no lookup), and KvResourceSparseApplyAdagrad at the global
// step the driver feeds.
func (p *plan) psKv(b *builder, r, s int, table, accum, ids string, train bool) {
	rows := b.op("gather", "KvResourceGather", attrs{"dtype": typeAttr(wire.DTFloat), "Tkeys": typeAttr(wire.DTInt64), "is_inference": boolAttr(!train)},
		table, ids, b.constFloat("gather/default_value", 0))
	b.send("gather/_send", rows, p.rowsLink(r, s), wire.DTFloat, false)
	if !train {
		return
	}
	grads := b.recv("grads", p.shardGradsLink(r, s), wire.DTFloat, false)
	step := b.recv("global_step", p.globalStepLink(r, s), wire.DTInt64, true)
	b.op("apply", "KvResourceSparseApplyAdagrad", attrs{"T": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64), "Tstep": typeAttr(wire.DTInt64)},
		table, accum, b.constFloat("learning_rate", p.cfg.LearningRate), grads, ids, step)
}

// Fetched tensor names of the worker partition.
const (
	fetchLoss = "loss:0"
	fetchProb = "prob:0"
)

// lookup adds the embedding lookup of ids over the servers' shards, as
// TensorFlow's embedding_lookup does with a partitioned variable and the
// "mod" strategy (the layout of fixed_size_partitioner's shards): each id
// is looked up once (Unique), id lives on server id mod PS at row
// id / PS, each server gets the ids of its shard (DynamicPartition) and
// sends their rows, and the rows are put back in the unique ids' order
// (DynamicStitch) and spread over the batch (GatherV2). It returns the
// rows of the batch, the unique ids' positions in the batch (idx), their
// count, and the partition of each unique id (empty with one server).
func (p *plan) lookup(b *builder, r int, ids string) (rows, idx, count, parts string) {
	P := p.cfg.PS
	uniq := b.op("unique", "Unique", attrs{"T": typeAttr(wire.DTInt64), "out_idx": typeAttr(wire.DTInt32)}, ids)
	idx = uniq + ":1"
	count = b.op("unique/size", "Size", attrs{"T": typeAttr(wire.DTInt64), "out_type": typeAttr(wire.DTInt32)}, uniq)
	shardIDs := []string{uniq}
	var positions []string
	if P > 1 {
		nps := b.constInt64("num_shards", int64(P))
		// An embedding variable's id is on the server its checkpoint
		// restores it to (embedding.PartitionOf): its saved part, id mod
		// 1000, mod the servers; id mod PS when PS divides 1000.
		key := uniq
		if p.cfg.hash() {
			key = b.op("shard/part", "FloorMod", attrs{"T": typeAttr(wire.DTInt64)}, uniq, b.constInt64("saved_parts", embedding.SavedParts))
		}
		parts = b.op("shard", "Cast", attrs{"SrcT": typeAttr(wire.DTInt64), "DstT": typeAttr(wire.DTInt32), "Truncate": boolAttr(false)},
			b.op("shard/mod", "FloorMod", attrs{"T": typeAttr(wire.DTInt64)}, key, nps))
		// A fixed table's shard holds id at row id / PS; an embedding
		// variable's is keyed by the id itself.
		local := uniq
		if !p.cfg.hash() {
			local = b.op("shard/row", "FloorDiv", attrs{"T": typeAttr(wire.DTInt64)}, uniq, nps)
		}
		split := b.op("shard/ids", "DynamicPartition", attrs{"T": typeAttr(wire.DTInt64), "num_partitions": intAttr(int64(P))}, local, parts)
		order := b.op("unique/range", "Range", attrs{"Tidx": typeAttr(wire.DTInt32)}, b.constInt32Scalar("zero_i", 0), count, b.constInt32Scalar("one_i", 1))
		pos := b.op("shard/positions", "DynamicPartition", attrs{"T": typeAttr(wire.DTInt32), "num_partitions": intAttr(int64(P))}, order, parts)
		shardIDs, positions = nil, nil
		for s := range P {
			shardIDs = append(shardIDs, split+":"+itoa(s))
			positions = append(positions, pos+":"+itoa(s))
		}
	}
	var shardRows []string
	for s := range P {
		b.send("shard_"+itoa(s)+"/ids/_send", shardIDs[s], p.shardIDsLink(r, s), wire.DTInt64, false)
		shardRows = append(shardRows, b.recv("shard_"+itoa(s)+"/rows", p.rowsLink(r, s), wire.DTFloat, false))
	}
	unique := shardRows[0]
	if P > 1 {
		unique = b.op("stitch", "ParallelDynamicStitch", attrs{"T": typeAttr(wire.DTFloat), "N": intAttr(int64(P))}, append(positions, shardRows...)...)
	}
	rows = b.op("rows", "GatherV2", attrs{"Tparams": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt32), "Taxis": typeAttr(wire.DTInt32)},
		unique, idx, b.constInt32Scalar("rows/axis", 0))
	return rows, idx, count, parts
}

// workerGraph is replica r's forward pass (and, with train, its backward
// pass) on worker r. The logit of an example is the sum of its features'
// embedding rows, the loss the mean log loss computed stably as
// softplus(z) - y·z, and the gradient of each row of the batch is
// (sigmoid(z) - y) / batch in every component. The gradients of a unique
// id's repeats are summed (UnsortedSegmentSum), as TensorFlow's optimizers
// sum duplicate indices, and each server is sent those of its shard.
func (p *plan) workerGraph(r int, train bool) *tfpb.GraphDef {
	cfg := p.cfg
	b := newBuilder(p.workers[r])
	F, D := int32(cfg.Fields), int32(cfg.EmbeddingDim)
	ids := b.recv("ids", p.idsLink(r), wire.DTInt64, true)
	labels := b.recv("labels", p.labelsLink(r), wire.DTFloat, true)
	rows, idx, count, parts := p.lookup(b, r, ids)
	x := b.reshape("x", rows, wire.DTFloat, -1, F*D)
	z := b.sum("logit", x, false, 1)
	prob := b.unary("prob", "Sigmoid", z)

	// loss = mean(max(z, 0) + log1p(exp(-|z|)) - y·z)
	zero := b.constFloat("zero", 0)
	relu := b.binary("loss/relu", "Maximum", z, zero)
	negZ := b.unary("loss/neg_z", "Neg", z)
	absZ := b.binary("loss/abs_z", "Maximum", z, negZ)
	tail := b.unary("loss/log1p_exp", "Log1p", b.unary("loss/exp", "Exp", b.unary("loss/neg_abs", "Neg", absZ)))
	yz := b.binary("loss/yz", "Mul", labels, z)
	perExample := b.binary("loss/per_example", "Sub", b.binary("loss/softplus", "Add", relu, tail), yz)
	loss := b.op("loss", "Mean", attrs{"T": typeAttr(wire.DTFloat), "Tidx": typeAttr(wire.DTInt32), "keep_dims": boolAttr(false)},
		perExample, b.constInt32("loss/axes", 0))
	b.send("loss/_send", loss, p.fetchLink(r, fetchLoss), wire.DTFloat, true)
	b.send("prob/_send", prob, p.fetchLink(r, fetchProb), wire.DTFloat, true)
	if !train {
		return &b.def
	}

	// d loss / d z = (sigmoid(z) - y) / batch, spread over every component
	// of every row of the example.
	dz := b.binary("grad/dz", "Mul", b.binary("grad/err", "Sub", prob, labels), b.constFloat("grad/scale", 1/float32(cfg.BatchSize)))
	ones := b.fill("grad/ones", 1, 1, int64(F*D))
	spread := b.binary("grad/spread", "Mul", b.reshape("grad/dz_col", dz, wire.DTFloat, -1, 1), ones)
	grads := b.reshape("grads", spread, wire.DTFloat, -1, D)
	unique := b.op("grads/unique", "UnsortedSegmentSum", attrs{"T": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt32), "Tnumsegments": typeAttr(wire.DTInt32)},
		grads, idx, count)
	if cfg.PS == 1 {
		b.send("shard_0/grads/_send", unique, p.shardGradsLink(r, 0), wire.DTFloat, false)
		return &b.def
	}
	split := b.op("grads/shard", "DynamicPartition", attrs{"T": typeAttr(wire.DTFloat), "num_partitions": intAttr(int64(cfg.PS))}, unique, parts)
	for s := range cfg.PS {
		b.send("shard_"+itoa(s)+"/grads/_send", split+":"+itoa(s), p.shardGradsLink(r, s), wire.DTFloat, false)
	}
	return &b.def
}
