package driver

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// A small Wide&Deep model, partitioned as TensorFlow's graph partitioner
// cuts it for a parameter-server job: the ps holds every variable (an
// embedding sharded in two by fixed_size_partitioner, a dense layer, wide
// weights, Adam's and Adagrad's slots and Adam's beta powers); the worker
// holds the computation. Its partitions use initializers, a sharded
// embedding lookup (Unique, DynamicPartition, per-shard gathers on the ps,
// DynamicStitch), Adam updates dense and sparse, and a function library
// (an initializer and the beta powers' update are functions called through
// StatefulPartitionedCall), and travel between the tasks as _Send/_Recv
// pairs.
const (
	wdVocab   = 10 // ids 0..9: shard s holds ids ≡ s (mod 2), at row id/2
	wdDim     = 2  // embedding width
	wdFields  = 2  // ids per example
	wdBatch   = 4
	wdDeepIn  = wdFields*wdDim + 1 // embeddings and one dense feature
	wdShards  = 2
	wdBeta1   = 0.9
	wdBeta2   = 0.999
	wdAdamLR  = 0.05
	wdWideLR  = 0.3
	wdEpsilon = 1e-7
)

// wdPlan names the devices and incarnations of the two tasks.
type wdPlan struct {
	ps, wk       string // devices
	psInc, wkInc uint64
}

func (p wdPlan) psToWk(name string, input string, dt wire.DataType) *tfpb.NodeDef {
	return SendNode(name+"/_send", input, name+":0", dt, p.ps, p.psInc, p.wk)
}
func (p wdPlan) wkFromPS(name string, dt wire.DataType) *tfpb.NodeDef {
	return RecvNode(name, name+":0", dt, p.ps, p.psInc, p.wk)
}
func (p wdPlan) wkToPS(name string, input string, dt wire.DataType) *tfpb.NodeDef {
	return SendNode(name+"/_send", input, name+":0", dt, p.wk, p.wkInc, p.ps)
}
func (p wdPlan) psFromWk(name string, dt wire.DataType) *tfpb.NodeDef {
	return RecvNode(name, name+":0", dt, p.wk, p.wkInc, p.ps)
}

// wdVar is a variable of the ps and its shape.
type wdVar struct {
	name  string
	shape []int64
}

// wdVars are every variable of the model, with the slots.
func wdVars() []wdVar {
	var vs []wdVar
	add := func(name string, shape ...int64) {
		vs = append(vs, wdVar{name, shape}, wdVar{name + "/Adam", shape}, wdVar{name + "/Adam_1", shape})
	}
	for s := range wdShards {
		add("emb/part_"+string(rune('0'+s)), wdVocab/wdShards, wdDim)
	}
	add("dense/kernel", wdDeepIn, 1)
	add("dense/bias", 1)
	return append(vs, wdVar{"wide", []int64{wdVocab, 1}}, wdVar{"wide/Adagrad", []int64{wdVocab, 1}},
		wdVar{"beta1_power", nil}, wdVar{"beta2_power", nil})
}

func handle(v wdVar) *tfpb.NodeDef {
	return NodeDef(v.name, "VarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", v.shape, "shared_name", v.name))
}

func handles() []*tfpb.NodeDef {
	var out []*tfpb.NodeDef
	for _, v := range wdVars() {
		out = append(out, handle(v))
	}
	return out
}

func fnArg(name string, dt tfpb.DataType) *tfpb.OpDef_ArgDef {
	return &tfpb.OpDef_ArgDef{Name: name, Type: dt}
}

// truncatedInit is the function the embeddings' initializer calls:
// TruncatedNormal(shape) · stddev, its seed an attribute of the call.
func truncatedInit() *tfpb.FunctionDef {
	ph := func(n string) *tfpb.AttrValue {
		return &tfpb.AttrValue{Value: &tfpb.AttrValue_Placeholder{Placeholder: n}}
	}
	return &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "truncated_init", InputArg: []*tfpb.OpDef_ArgDef{fnArg("shape", tfpb.DataType_DT_INT32), fnArg("stddev", tfpb.DataType_DT_FLOAT)},
			OutputArg: []*tfpb.OpDef_ArgDef{fnArg("value", tfpb.DataType_DT_FLOAT)}, Attr: []*tfpb.OpDef_AttrDef{{Name: "seed", Type: "int"}}},
		NodeDef: []*tfpb.NodeDef{
			{Name: "draw", Op: "TruncatedNormal", Input: []string{"shape"}, Attr: map[string]*tfpb.AttrValue{
				"dtype": typeAttr(wire.DTFloat), "T": typeAttr(wire.DTInt32), "seed": ph("seed"), "seed2": intAttr(1)}},
			{Name: "scale", Op: "Mul", Input: []string{"draw:output:0", "stddev"}, Attr: map[string]*tfpb.AttrValue{"T": typeAttr(wire.DTFloat)}},
		},
		Ret: map[string]string{"value": "scale:z:0"},
	}
}

// updatePowers is Adam's _finish: each beta power times its beta, through
// the variables' handles; it has only control outputs.
func updatePowers() *tfpb.FunctionDef {
	f := typeAttr(wire.DTFloat)
	return &tfpb.FunctionDef{
		Signature: &tfpb.OpDef{Name: "update_powers", IsStateful: true, ControlOutput: []string{"a1", "a2"},
			InputArg: []*tfpb.OpDef_ArgDef{fnArg("b1p", tfpb.DataType_DT_RESOURCE), fnArg("b2p", tfpb.DataType_DT_RESOURCE), fnArg("beta1", tfpb.DataType_DT_FLOAT), fnArg("beta2", tfpb.DataType_DT_FLOAT)}},
		NodeDef: []*tfpb.NodeDef{
			{Name: "r1", Op: "ReadVariableOp", Input: []string{"b1p"}, Attr: map[string]*tfpb.AttrValue{"dtype": f}},
			{Name: "m1", Op: "Mul", Input: []string{"r1:value:0", "beta1"}, Attr: map[string]*tfpb.AttrValue{"T": f}},
			{Name: "a1", Op: "AssignVariableOp", Input: []string{"b1p", "m1:z:0"}, Attr: map[string]*tfpb.AttrValue{"dtype": f}},
			{Name: "r2", Op: "ReadVariableOp", Input: []string{"b2p"}, Attr: map[string]*tfpb.AttrValue{"dtype": f}},
			{Name: "m2", Op: "Mul", Input: []string{"r2:value:0", "beta2"}, Attr: map[string]*tfpb.AttrValue{"T": f}},
			{Name: "a2", Op: "AssignVariableOp", Input: []string{"b2p", "m2:z:0"}, Attr: map[string]*tfpb.AttrValue{"dtype": f}},
		},
		ControlRet: map[string]string{"a1": "a1", "a2": "a2"},
	}
}

func library(fns ...*tfpb.FunctionDef) *tfpb.FunctionDefLibrary {
	return &tfpb.FunctionDefLibrary{Function: fns}
}

func partitionedCall(name, fn string, inputs []string, tin, tout []wire.DataType, attrs map[string]*tfpb.AttrValue) *tfpb.NodeDef {
	n := NodeDef(name, "StatefulPartitionedCall", inputs, Attrs("Tin", tin, "Tout", tout))
	n.Attr["f"] = &tfpb.AttrValue{Value: &tfpb.AttrValue_Func{Func: &tfpb.NameAttrList{Name: fn, Attr: attrs}}}
	return n
}

// wdReady is the ps's ready op: whether each variable is initialized,
// packed into one bool vector, as a Supervisor asks before training.
func wdReady(p wdPlan) *tfpb.GraphDef {
	nodes := handles()
	var ins []string
	for _, v := range wdVars() {
		nodes = append(nodes, NodeDef(v.name+"/is_init", "VarIsInitializedOp", In(v.name), nil))
		ins = append(ins, v.name+"/is_init")
	}
	nodes = append(nodes, NodeDef("ready", "Pack", ins, Attrs("T", wire.DTBool, "N", len(ins))),
		FetchNode("ready/_send", "ready", "ready:0", wire.DTBool, p.ps, p.psInc))
	return GraphDef(nodes...)
}

// wdInit is the ps's initializer: truncated normal embeddings (through the
// library's function), a Glorot-uniform kernel, zero bias, slots and wide
// weights, Adagrad's accumulator at 0.1, the beta powers at their betas.
func wdInit() *tfpb.GraphDef {
	f, i32 := wire.DTFloat, wire.DTInt32
	nodes := handles()
	assign := func(v, value string) {
		nodes = append(nodes, NodeDef(v+"/Assign", "AssignVariableOp", In(v, value), Attrs("dtype", f)))
	}
	fill := func(name string, x float32, dims ...int32) string {
		nodes = append(nodes, ConstI32(name+"/dims", []int64{int64(len(dims))}, dims...), ConstF32(name+"/value", nil, x),
			NodeDef(name, "Fill", In(name+"/dims", name+"/value"), Attrs("T", f)))
		return name
	}
	for _, v := range wdVars() {
		dims := make([]int32, len(v.shape))
		for i, d := range v.shape {
			dims[i] = int32(d)
		}
		switch {
		case v.name == "emb/part_0" || v.name == "emb/part_1":
			nodes = append(nodes, ConstI32(v.name+"/shape", []int64{2}, dims...), ConstF32(v.name+"/stddev", nil, 0.1),
				partitionedCall(v.name+"/init", "truncated_init", In(v.name+"/shape", v.name+"/stddev"), []wire.DataType{i32, f}, []wire.DataType{f}, Attrs("seed", len(v.name))))
			assign(v.name, v.name+"/init")
		case v.name == "dense/kernel":
			// Glorot uniform: U(-l, l), l = √(6 / (fan_in + fan_out)).
			l := float32(math.Sqrt(6.0 / (wdDeepIn + 1)))
			nodes = append(nodes, ConstI32("kernel/shape", []int64{2}, dims...),
				NodeDef("kernel/uniform", "RandomUniform", In("kernel/shape"), Attrs("dtype", f, "T", i32, "seed", 3, "seed2", 4)),
				ConstF32("kernel/range", nil, 2*l), ConstF32("kernel/min", nil, -l),
				NodeDef("kernel/scaled", "Mul", In("kernel/uniform", "kernel/range"), Attrs("T", f)),
				NodeDef("kernel/init", "AddV2", In("kernel/scaled", "kernel/min"), Attrs("T", f)))
			assign(v.name, "kernel/init")
		case v.name == "wide/Adagrad":
			assign(v.name, fill(v.name+"/init", 0.1, dims...))
		case v.name == "beta1_power":
			nodes = append(nodes, ConstF32("beta1_power/init", nil, wdBeta1))
			assign(v.name, "beta1_power/init")
		case v.name == "beta2_power":
			nodes = append(nodes, ConstF32("beta2_power/init", nil, wdBeta2))
			assign(v.name, "beta2_power/init")
		default:
			assign(v.name, fill(v.name+"/init", 0, dims...))
		}
	}
	g := GraphDef(nodes...)
	g.Library = library(truncatedInit())
	return g
}

// wdPS is the ps's partition of a training step: it serves the rows of
// each shard's ids, the wide weights of the unique ids and the dense
// layer to the worker, takes back their gradients and applies Adam (lazy
// Adam on the shards), Adagrad on the wide weights, then the function
// updating the beta powers.
func wdPS(p wdPlan) *tfpb.GraphDef {
	f, i64 := wire.DTFloat, wire.DTInt64
	nodes := handles()
	add := func(n ...*tfpb.NodeDef) { nodes = append(nodes, n...) }
	add(ConstF32("adam/lr", nil, wdAdamLR), ConstF32("adam/beta1", nil, wdBeta1), ConstF32("adam/beta2", nil, wdBeta2), ConstF32("adam/epsilon", nil, wdEpsilon),
		ConstF32("wide/lr", nil, wdWideLR),
		NodeDef("adam/b1p", "ReadVariableOp", In("beta1_power"), Attrs("dtype", f)),
		NodeDef("adam/b2p", "ReadVariableOp", In("beta2_power"), Attrs("dtype", f)))
	scalars := []string{"adam/b1p", "adam/b2p", "adam/lr", "adam/beta1", "adam/beta2", "adam/epsilon"}
	var applies []string
	for s := range wdShards {
		part := "emb/part_" + string(rune('0'+s))
		add(p.psFromWk(part+"/ids", i64),
			NodeDef(part+"/gather", "ResourceGather", In(part, part+"/ids"), Attrs("dtype", f, "Tindices", i64)),
			p.psToWk(part+"/rows", part+"/gather", f),
			p.psFromWk(part+"/grad", f),
			NodeDef(part+"/apply", "ResourceSparseApplyAdam", append(In(part, part+"/Adam", part+"/Adam_1"), append(scalars, part+"/grad", part+"/ids")...), Attrs("T", f, "Tindices", i64)))
		applies = append(applies, "^"+part+"/apply")
	}
	for _, v := range []string{"dense/kernel", "dense/bias"} {
		add(NodeDef(v+"/read", "ReadVariableOp", In(v), Attrs("dtype", f)),
			p.psToWk(v+"/value", v+"/read", f),
			p.psFromWk(v+"/grad", f),
			// The update waits for the read the worker was sent.
			NodeDef(v+"/apply", "ResourceApplyAdam", append(In(v, v+"/Adam", v+"/Adam_1"), append(scalars, v+"/grad", "^"+v+"/read")...), Attrs("T", f)))
		applies = append(applies, "^"+v+"/apply")
	}
	add(p.psFromWk("wide/ids", i64),
		NodeDef("wide/gather", "ResourceGather", In("wide", "wide/ids"), Attrs("dtype", f, "Tindices", i64)),
		p.psToWk("wide/rows", "wide/gather", f),
		p.psFromWk("wide/grad", f),
		NodeDef("wide/apply", "ResourceSparseApplyAdagrad", In("wide", "wide/Adagrad", "wide/lr", "wide/grad", "wide/ids"), Attrs("T", f, "Tindices", i64)))
	applies = append(applies, "^wide/apply")
	add(partitionedCall("adam/finish", "update_powers", append(In("beta1_power", "beta2_power", "adam/beta1", "adam/beta2"), applies...),
		[]wire.DataType{wire.DTResource, wire.DTResource, f, f}, nil, nil))
	g := GraphDef(nodes...)
	g.Library = library(updatePowers())
	return g
}

// wdWorker is the worker's partition: the forward pass, the log loss, and
// the backward pass by hand, as the gradients TensorFlow would build.
func wdWorker(p wdPlan) *tfpb.GraphDef {
	f, i32, i64 := wire.DTFloat, wire.DTInt32, wire.DTInt64
	var nodes []*tfpb.NodeDef
	add := func(n ...*tfpb.NodeDef) { nodes = append(nodes, n...) }
	op := func(name, op string, inputs []string, kv ...any) string {
		add(NodeDef(name, op, inputs, Attrs(kv...)))
		return name
	}
	shape := func(name string, dims ...int32) string {
		add(ConstI32(name, []int64{int64(len(dims))}, dims...))
		return name
	}
	scalarI32 := func(name string, v int32) string { add(ConstI32(name, nil, v)); return name }
	add(FeedNode("ids", "ids:0", i64, p.wk), FeedNode("dense", "dense:0", f, p.wk), FeedNode("labels", "labels:0", f, p.wk))

	// The sharded lookup, as embedding_lookup partitions it.
	op("unique", "Unique", In("ids"), "T", i64)
	op("unique/size", "Size", In("unique"), "T", i64)
	add(ConstI64("shards", nil, wdShards))
	op("shard/mod", "FloorMod", In("unique", "shards"), "T", i64)
	op("shard", "Cast", In("shard/mod"), "SrcT", i64, "DstT", i32)
	op("shard/row", "FloorDiv", In("unique", "shards"), "T", i64)
	op("shard/ids", "DynamicPartition", In("shard/row", "shard"), "T", i64, "num_partitions", wdShards)
	op("unique/range", "Range", In(scalarI32("zero", 0), "unique/size", scalarI32("one", 1)), "Tidx", i32)
	op("shard/pos", "DynamicPartition", In("unique/range", "shard"), "T", i32, "num_partitions", wdShards)
	var stitchIn []string
	for s := range wdShards {
		part := "emb/part_" + string(rune('0'+s))
		add(p.wkToPS(part+"/ids", "shard/ids:"+string(rune('0'+s)), i64), p.wkFromPS(part+"/rows", f))
		stitchIn = append(stitchIn, "shard/pos:"+string(rune('0'+s)))
	}
	stitchIn = append(stitchIn, "emb/part_0/rows", "emb/part_1/rows")
	op("stitch", "ParallelDynamicStitch", stitchIn, "T", f, "N", wdShards)
	op("emb", "GatherV2", In("stitch", "unique:1", scalarI32("axis0", 0)), "Tparams", f, "Tindices", i32, "Taxis", i32)
	op("emb/flat", "Reshape", In("emb", shape("emb/flat/shape", -1, wdFields*wdDim)), "T", f)
	op("deep_in", "ConcatV2", In("emb/flat", "dense", scalarI32("axis1", 1)), "T", f, "N", 2)
	add(p.wkFromPS("dense/kernel/value", f), p.wkFromPS("dense/bias/value", f))
	op("deep", "AddV2", In(op("deep/mm", "MatMul", In("deep_in", "dense/kernel/value"), "T", f), "dense/bias/value"), "T", f)

	// Wide: the sum of the ids' weights.
	add(p.wkToPS("wide/ids", "unique", i64), p.wkFromPS("wide/rows", f))
	op("wide/w", "GatherV2", In("wide/rows", "unique:1", "axis0"), "Tparams", f, "Tindices", i32, "Taxis", i32)
	op("wide", "Sum", In(op("wide/by_example", "Reshape", In("wide/w", shape("wide/shape", -1, wdFields)), "T", f), "one"), "T", f, "keep_dims", true)

	// z, p, the mean log loss -(y log p + (1-y) log(1-p)).
	op("z", "Reshape", In(op("z/col", "AddV2", In("deep", "wide"), "T", f), shape("z/shape", -1)), "T", f)
	op("p", "Sigmoid", In("z"), "T", f)
	add(ConstF32("c1", nil, 1))
	op("loss/a", "Mul", In("labels", op("loss/logp", "Log", In("p"), "T", f)), "T", f)
	op("loss/b", "Mul", In(op("loss/ny", "Sub", In("c1", "labels"), "T", f), op("loss/logq", "Log", In(op("loss/q", "Sub", In("c1", "p"), "T", f)), "T", f)), "T", f)
	op("loss", "Neg", In(op("loss/mean", "Mean", In(op("loss/sum", "AddV2", In("loss/a", "loss/b"), "T", f), "zero"), "T", f)), "T", f)
	add(FetchNode("loss/_send", "loss", "loss:0", f, p.wk, p.wkInc))

	// dz = (p - y) / batch, the batch size being tf.shape(labels)[0].
	add(ConstI32("b0", []int64{1}, 0), ConstI32("b1", []int64{1}, 1))
	op("batch", "StridedSlice", In(op("labels/shape", "Shape", In("labels"), "T", f), "b0", "b1", "b1"), "T", i32, "Index", i32, "shrink_axis_mask", 1)
	op("dz", "RealDiv", In(op("err", "Sub", In("p", "labels"), "T", f), op("batch/f", "Cast", In("batch"), "SrcT", i32, "DstT", f)), "T", f)
	op("dz/col", "Reshape", In("dz", shape("dz/col/shape", -1, 1)), "T", f)
	// Dense layer.
	op("dense/kernel/g", "MatMul", In("deep_in", "dz/col"), "T", f, "transpose_a", true)
	op("dense/bias/g", "Sum", In("dz/col", "zero"), "T", f)
	add(p.wkToPS("dense/kernel/grad", "dense/kernel/g", f), p.wkToPS("dense/bias/grad", "dense/bias/g", f))
	// Embeddings: the deep input's gradient, its embedding columns per
	// id, summed over repeats, split by shard.
	op("deep_in/g", "MatMul", In("dz/col", "dense/kernel/value"), "T", f, "transpose_b", true)
	add(ConstI32("emb/g/begin", []int64{2}, 0, 0), ConstI32("emb/g/size", []int64{2}, -1, wdFields*wdDim))
	op("emb/g", "Reshape", In(op("emb/g/flat", "Slice", In("deep_in/g", "emb/g/begin", "emb/g/size"), "T", f, "Index", i32), shape("emb/g/shape", -1, wdDim)), "T", f)
	op("emb/g/unique", "UnsortedSegmentSum", In("emb/g", "unique:1", "unique/size"), "T", f, "Tindices", i32)
	op("emb/g/shard", "DynamicPartition", In("emb/g/unique", "shard"), "T", f, "num_partitions", wdShards)
	for s := range wdShards {
		add(p.wkToPS("emb/part_"+string(rune('0'+s))+"/grad", "emb/g/shard:"+string(rune('0'+s)), f))
	}
	// Wide weights: dz for each of the example's ids, summed over repeats.
	add(ConstF32("wide/ones", []int64{1, wdFields}, 1))
	op("wide/g", "Reshape", In(op("wide/g/spread", "Mul", In("dz/col", "wide/ones"), "T", f), shape("wide/g/shape", -1, 1)), "T", f)
	op("wide/g/unique", "UnsortedSegmentSum", In("wide/g", "unique:1", "unique/size"), "T", f, "Tindices", i32)
	add(p.wkToPS("wide/grad", "wide/g/unique", f))
	return GraphDef(nodes...)
}

// wdBatch is a learnable batch: an example clicks when its first id is
// below 5; ids repeat within the batch.
func wdBatchOf(step int) (ids []int64, dense, labels []float32) {
	for i := range wdBatch {
		a, b := int64((step+3*i)%wdVocab), int64((2*step+i)%wdVocab)
		ids = append(ids, a, b)
		dense = append(dense, float32(i)/wdBatch)
		labels = append(labels, map[bool]float32{true: 1, false: 0}[a < 5])
	}
	return ids, dense, labels
}

// TestWideAndDeepPartitions registers the ps's and the worker's partitions
// of the model and drives them as a master does, over gRPC and over
// starwire: GetStatus for the incarnations, CreateWorkerSession,
// RegisterGraph, the ready op before and after the initializer, training
// steps, CleanupGraph after each, then DeregisterGraph and
// DeleteWorkerSession (Close).
func TestWideAndDeepPartitions(t *testing.T) {
	const steps = 40
	for _, protocol := range []string{"grpc", "grpc+seastar"} {
		t.Run(protocol, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tc := newTestCluster(t, protocol)
			d := tc.driver(t)
			status, err := d.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p := wdPlan{ps: psDev, wk: workerDev,
				psInc: status[psTask].GetDeviceAttributes()[0].GetIncarnation(), wkInc: status[workerTask].GetDeviceAttributes()[0].GetIncarnation()}
			if err := d.CreateSessions(ctx, nil); err != nil {
				t.Fatal(err)
			}
			register := func(task string, g *tfpb.GraphDef) Graph {
				t.Helper()
				h, err := d.RegisterGraph(ctx, task, g)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			ready, initG := register(psTask, wdReady(p)), register(psTask, wdInit())
			psG, wkG := register(psTask, wdPS(p)), register(workerTask, wdWorker(p))
			step := int64(1000)
			run := func(parts ...Partition) {
				t.Helper()
				step++
				if err := d.RunPartitions(ctx, step, parts...); err != nil {
					t.Fatal(err)
				}
				if err := d.CleanupStep(ctx, step, psTask, workerTask); err != nil {
					t.Fatal(err)
				}
			}
			readyKey := FetchKey("ready:0", p.ps, p.psInc)
			checkReady := func(want bool) {
				t.Helper()
				var out handlers.Fetched
				defer out.Release()
				run(Partition{Graph: ready, Fetches: []string{readyKey}, Out: &out})
				got := out.Tensors[0]
				if got.DType != wire.DTBool || len(got.Data) != len(wdVars()) {
					t.Fatalf("ready = %v%v", got.DType, got.Shape)
				}
				for i, b := range got.Data {
					if (b == 1) != want {
						t.Fatalf("variable %s initialized: %v, want %v", wdVars()[i].name, b == 1, want)
					}
				}
			}
			checkReady(false)
			run(Partition{Graph: initG})
			checkReady(true)

			lossKey := FetchKey("loss:0", p.wk, p.wkInc)
			var losses []float32
			for s := range steps {
				ids, dense, labels := wdBatchOf(s)
				var out handlers.Fetched
				run(Partition{Graph: psG}, Partition{Graph: wkG, Out: &out, Fetches: []string{lossKey}, Feeds: []handlers.Feed{
					{Key: FeedKey("ids:0", p.wk), Tensor: wire.Tensor{DType: wire.DTInt64, Shape: []int64{int64(len(ids))}, Data: tensor.Bytes(ids)}},
					{Key: FeedKey("dense:0", p.wk), Tensor: wire.Tensor{DType: wire.DTFloat, Shape: []int64{wdBatch, 1}, Data: tensor.Bytes(dense)}},
					{Key: FeedKey("labels:0", p.wk), Tensor: wire.Tensor{DType: wire.DTFloat, Shape: []int64{wdBatch}, Data: tensor.Bytes(labels)}},
				}})
				losses = append(losses, tensor.View[float32](out.Tensors[0].Data)[0])
				out.Release()
			}
			first, last := mean32(losses[:steps/4]), mean32(losses[3*steps/4:])
			t.Logf("loss: first quarter %.4f, last quarter %.4f", first, last)
			if !(last < 0.8*first) {
				t.Fatalf("loss did not fall: first quarter %.4f, last quarter %.4f (%v)", first, last, losses)
			}
			// Adam's finishing function ran once per step.
			powers := register(psTask, GraphDef(
				handle(wdVar{"beta1_power", nil}), NodeDef("r", "ReadVariableOp", In("beta1_power"), Attrs("dtype", wire.DTFloat)),
				FetchNode("r/_send", "r", "r:0", wire.DTFloat, p.ps, p.psInc)))
			var out handlers.Fetched
			defer out.Release()
			run(Partition{Graph: powers, Fetches: []string{FetchKey("r:0", p.ps, p.psInc)}, Out: &out})
			if got, want := tensor.View[float32](out.Tensors[0].Data)[0], math.Pow(wdBeta1, steps+1); math.Abs(float64(got)-want) > 1e-4 {
				t.Fatalf("beta1_power = %v after %d steps, want %v", got, steps, want)
			}
			if err := d.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mean32(v []float32) float32 {
	var s float32
	for _, x := range v {
		s += x
	}
	return s / float32(len(v))
}
