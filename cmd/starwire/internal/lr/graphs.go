package lr

import (
	"fmt"

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

// Links between the client of replica r, parameter server s and worker r.
func (p *plan) idsLink(r, s int) link {
	c, inc := p.client(r)
	return link{tensor: "ids:0", src: c, srcInc: inc, dst: p.ps[s]}
}

func (p *plan) rowsLink(r, s int) link {
	return link{tensor: "embedding/part_" + itoa(s) + "/gather:0", src: p.ps[s], srcInc: p.psInc[s], dst: p.workers[r]}
}

func (p *plan) pushIDsLink(r, s int) link {
	c, inc := p.client(r)
	return link{tensor: "push/ids:0", src: c, srcInc: inc, dst: p.ps[s]}
}

func (p *plan) gradsLink(r, s int) link {
	c, inc := p.client(r)
	return link{tensor: "push/grads:0", src: c, srcInc: inc, dst: p.ps[s]}
}

func (p *plan) labelsLink(r int) link {
	c, inc := p.client(r)
	return link{tensor: "labels:0", src: c, srcInc: inc, dst: p.workers[r]}
}

func (p *plan) maskLink(r, s int) link {
	c, inc := p.client(r)
	return link{tensor: "mask_" + itoa(s) + ":0", src: c, srcInc: inc, dst: p.workers[r]}
}

// fetch links: worker r to its client.
func (p *plan) fetchLink(r int, tensor string) link {
	c, _ := p.client(r)
	return link{tensor: tensor, src: p.workers[r], srcInc: p.wInc[r], dst: c}
}

// variables adds handles of parameter server s's table and accumulator.
func (p *plan) variables(b *builder, s int) (table, accum string) {
	shape := shapeAttr(p.cfg.shardRows(s), int64(p.cfg.EmbeddingDim))
	table = b.op("table", "VarHandleOp", attrs{"dtype": typeAttr(wire.DTFloat), "shape": shape, "shared_name": strAttr(tableName(s)), "container": strAttr("")})
	accum = b.op("accum", "VarHandleOp", attrs{"dtype": typeAttr(wire.DTFloat), "shape": shape, "shared_name": strAttr(accumName(s)), "container": strAttr("")})
	return table, accum
}

// initGraph sets parameter server s's table to zeros and its Adagrad
// accumulator to the initial value.
func (p *plan) initGraph(s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	rows, dim := p.cfg.shardRows(s), int64(p.cfg.EmbeddingDim)
	zeros := b.fill("zeros", 0, rows, dim)
	init := b.fill("accum_init", p.cfg.InitialAccumulator, rows, dim)
	b.op("table/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, table, zeros)
	b.op("accum/assign", "AssignVariableOp", attrs{"dtype": typeAttr(wire.DTFloat)}, accum, init)
	return &b.def
}

// gatherGraph is parameter server s's half of replica r's forward pass: it
// gathers the rows of the fed ids and sends them to worker r, which pulls
// them with RecvTensor.
func (p *plan) gatherGraph(r, s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, _ := p.variables(b, s)
	ids := b.recv("ids", p.idsLink(r, s), wire.DTInt64, true)
	rows := b.op("gather", "ResourceGather", attrs{"dtype": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64)}, table, ids)
	b.send("gather/_send", rows, p.rowsLink(r, s), wire.DTFloat, false)
	return &b.def
}

// applyGraph applies replica r's sparse gradient to parameter server s's
// rows with Adagrad.
func (p *plan) applyGraph(r, s int) *tfpb.GraphDef {
	b := newBuilder(p.ps[s])
	table, accum := p.variables(b, s)
	ids := b.recv("push/ids", p.pushIDsLink(r, s), wire.DTInt64, true)
	grads := b.recv("push/grads", p.gradsLink(r, s), wire.DTFloat, true)
	lr := b.constFloat("learning_rate", p.cfg.LearningRate)
	b.op("apply", "ResourceSparseApplyAdagrad", attrs{"T": typeAttr(wire.DTFloat), "Tindices": typeAttr(wire.DTInt64)},
		table, accum, lr, grads, ids)
	return &b.def
}

// Fetched tensor names of the worker partition.
const (
	fetchGrads = "grads:0"
	fetchLoss  = "loss:0"
	fetchProb  = "prob:0"
)

// workerGraph is replica r's forward and backward pass on worker r. The
// logit of an example is the sum of its features' embedding rows, the loss
// the mean log loss computed stably as softplus(z) - y·z, and the gradient
// of each gathered row is (sigmoid(z) - y) / batch in every component.
// With several parameter servers, every server sends a row for every
// feature (rows of ids it does not hold are masked to zero here), so the
// rows stay in example order without a gather on the worker.
func (p *plan) workerGraph(r int) *tfpb.GraphDef {
	cfg := p.cfg
	b := newBuilder(p.workers[r])
	F, D := int32(cfg.Fields), int32(cfg.EmbeddingDim)
	labels := b.recv("labels", p.labelsLink(r), wire.DTFloat, true)
	var rows string
	for s := range cfg.PS {
		part := b.recv("rows_"+itoa(s), p.rowsLink(r, s), wire.DTFloat, false)
		if cfg.PS > 1 {
			mask := b.recv("mask_"+itoa(s), p.maskLink(r, s), wire.DTFloat, true)
			part = b.binary("rows_"+itoa(s)+"/masked", "Mul", part, mask)
		}
		if rows == "" {
			rows = part
		} else {
			rows = b.binary("rows/sum_"+itoa(s), "Add", rows, part)
		}
	}
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

	// d loss / d z = (sigmoid(z) - y) / batch, spread over every component
	// of every row of the example.
	dz := b.binary("grad/dz", "Mul", b.binary("grad/err", "Sub", prob, labels), b.constFloat("grad/scale", 1/float32(cfg.BatchSize)))
	ones := b.fill("grad/ones", 1, 1, int64(F*D))
	spread := b.binary("grad/spread", "Mul", b.reshape("grad/dz_col", dz, wire.DTFloat, -1, 1), ones)
	grads := b.reshape("grads", spread, wire.DTFloat, -1, D)

	b.send("grads/_send", grads, p.fetchLink(r, fetchGrads), wire.DTFloat, true)
	b.send("loss/_send", loss, p.fetchLink(r, fetchLoss), wire.DTFloat, true)
	b.send("prob/_send", prob, p.fetchLink(r, fetchProb), wire.DTFloat, true)
	return &b.def
}
