package ops_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

var (
	f32, i64 = wire.DTFloat, wire.DTInt64
	tokenQ   = func(name string, extra ...any) *tfpb.NodeDef {
		return NodeDef(name, "FIFOQueueV2", nil, Attrs(append([]any{"component_types", []wire.DataType{i64}, "shapes", [][]int64{{}}}, extra...)...))
	}
	denseAcc = func(name string, extra ...any) *tfpb.NodeDef {
		return NodeDef(name, "ResourceConditionalAccumulator", nil, Attrs(append([]any{"dtype", f32, "shape", []int64{2}}, extra...)...))
	}
)

// TestDataflowOpErrors checks that bad input to the accumulator and
// queue ops fails with TensorFlow's code and words.
func TestDataflowOpErrors(t *testing.T) {
	sparseAcc := NodeDef("acc", "SparseConditionalAccumulator", nil, Attrs("dtype", f32, "shape", []int64{10, 2}))
	runErrCases(t, []errCase{
		{"reduction type", []*tfpb.NodeDef{denseAcc("out", "reduction_type", "MAX")}, wire.InvalidArgument, `"reduction_type" is "MAX"`},
		{"accumulator of int32", []*tfpb.NodeDef{NodeDef("out", "ResourceConditionalAccumulator", nil, Attrs("dtype", wire.DTInt32, "shape", []int64{2}))}, wire.InvalidArgument, "want one of"},
		{"local_step not scalar", []*tfpb.NodeDef{denseAcc("acc"), ConstI64("s", []int64{1}, 0), ConstF32("g", []int64{2}, 1, 2),
			NodeDef("out", "ResourceAccumulatorApplyGradient", In("acc", "s", "g"), Attrs("dtype", f32))}, wire.InvalidArgument, "Argument local_step must be scalar, but had bad shape [1]"},
		{"gradient shape", []*tfpb.NodeDef{denseAcc("acc"), ConstI64("s", nil, 0), ConstF32("g", []int64{3}, 1, 2, 3),
			NodeDef("out", "ResourceAccumulatorApplyGradient", In("acc", "s", "g"), Attrs("dtype", f32))}, wire.InvalidArgument, "Shape mismatch: expected [2], got [3]"},
		{"gradient dtype", []*tfpb.NodeDef{denseAcc("acc"), ConstI64("s", nil, 0), ConstI64("g", []int64{2}, 1, 2),
			NodeDef("out", "ResourceAccumulatorApplyGradient", In("acc", "s", "g"), Attrs("dtype", i64))}, wire.InvalidArgument, "holds float, the op's dtype is int64"},
		{"take of none", []*tfpb.NodeDef{denseAcc("acc"), ConstI32("n", nil, 0),
			NodeDef("out", "ResourceAccumulatorTakeGradient", In("acc", "n"), Attrs("dtype", f32))}, wire.InvalidArgument, "Argument num_required must be positive, but was 0"},
		{"dense op on a sparse accumulator", []*tfpb.NodeDef{sparseAcc, ConstI32("n", nil, 1),
			NodeDef("out", "AccumulatorTakeGradient", In("acc", "n"), Attrs("dtype", f32))}, wire.InvalidArgument, "is sparse"},
		{"sparse index out of shape", []*tfpb.NodeDef{sparseAcc, ConstI64("s", nil, 0), ConstI64("i", []int64{1}, 10), ConstF32("v", []int64{1, 2}, 1, 1), ConstI64("sh", []int64{2}, 10, 2),
			NodeDef("out", "SparseAccumulatorApplyGradient", In("acc", "s", "i", "v", "sh"), Attrs("dtype", f32, "has_known_shape", true))}, wire.InvalidArgument, "index is 10 exceeded 10"},
		{"queue shape not fully defined", []*tfpb.NodeDef{NodeDef("out", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64}, "shapes", [][]int64{{-1}}))}, wire.InvalidArgument, "not fully defined"},
		{"queue shapes and types", []*tfpb.NodeDef{NodeDef("out", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64, f32}, "shapes", [][]int64{{}}))}, wire.InvalidArgument, "2 component types and 1 shapes"},
		{"enqueue signature", []*tfpb.NodeDef{tokenQ("q"), ConstF32("x", nil, 1),
			NodeDef("out", "QueueEnqueueV2", In("q", "x"), Attrs("Tcomponents", []wire.DataType{f32}))}, wire.InvalidArgument, "Signature mismatch, have: resource, float-> expected: resource, int64->"},
		{"enqueue shape", []*tfpb.NodeDef{tokenQ("q"), ConstI64("x", []int64{2}, 1, 2),
			NodeDef("out", "QueueEnqueueV2", In("q", "x"), Attrs("Tcomponents", []wire.DataType{i64}))}, wire.InvalidArgument, "Shape mismatch in tuple component 0. Expected [], got [2]"},
		{"enqueue many shape", []*tfpb.NodeDef{NodeDef("q", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64}, "shapes", [][]int64{{2}})), ConstI64("x", []int64{2}, 1, 2),
			NodeDef("out", "QueueEnqueueManyV2", In("q", "x"), Attrs("Tcomponents", []wire.DataType{i64}))}, wire.InvalidArgument, "Shape mismatch in tuple component 0. Expected [2,2], got [2]"},
		{"enqueue many of a scalar", []*tfpb.NodeDef{NodeDef("q", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64})), ConstI64("x", nil, 1),
			NodeDef("out", "QueueEnqueueManyV2", In("q", "x"), Attrs("Tcomponents", []wire.DataType{i64}))}, wire.InvalidArgument, "rank >= 1"},
		{"enqueue many batch sizes", []*tfpb.NodeDef{NodeDef("q", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64, i64})), ConstI64("x", []int64{2}, 1, 2), ConstI64("y", []int64{1}, 1),
			NodeDef("out", "QueueEnqueueManyV2", In("q", "x", "y"), Attrs("Tcomponents", []wire.DataType{i64, i64}))}, wire.InvalidArgument, "All input tensors must have the same size in the 0th dimension. Component 1 has 1, and should have 2"},
		{"dequeue signature", []*tfpb.NodeDef{tokenQ("q"), NodeDef("out", "QueueDequeueV2", In("q"), Attrs("component_types", []wire.DataType{f32}))}, wire.InvalidArgument, "Signature mismatch, have: resource->float expected: resource->int64"},
		{"dequeue many of an unshaped queue", []*tfpb.NodeDef{NodeDef("q", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64})), ConstI32("n", nil, 1),
			NodeDef("out", "QueueDequeueManyV2", In("q", "n"), Attrs("component_types", []wire.DataType{i64}))}, wire.InvalidArgument, "require the components to have specified shapes"},
		{"dequeue many of -1", []*tfpb.NodeDef{tokenQ("q"), ConstI32("n", nil, -1),
			NodeDef("out", "QueueDequeueManyV2", In("q", "n"), Attrs("component_types", []wire.DataType{i64}))}, wire.InvalidArgument, "DequeueManyOp requested -1 < 0 elements"},
		{"queue handle is no tensor", []*tfpb.NodeDef{tokenQ("q"), NodeDef("out", "Identity", In("q"), Attrs("T", wire.DTResource))}, wire.InvalidArgument, "resource handle"},
		{"accumulator op on a queue", []*tfpb.NodeDef{tokenQ("q"), NodeDef("out", "ResourceAccumulatorNumAccumulated", In("q"), nil)}, wire.InvalidArgument, "not a handle of an accumulator"},
	})
}

// TestSharedQueueMismatch: a node naming a shared queue made with other
// attributes is refused, as TensorFlow refuses it.
func TestSharedQueueMismatch(t *testing.T) {
	env := NewEnv(t)
	size := func(q *tfpb.NodeDef) *tfpb.GraphDef {
		return GraphDef(q, NodeDef("out", "QueueSizeV2", In(q.Name), nil))
	}
	if _, err := Run(t, env, size(tokenQ("a", "shared_name", "x", "capacity", 2)), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q   *tfpb.NodeDef
		msg string
	}{
		{tokenQ("b", "shared_name", "x", "capacity", 3), "Shared queue 'x' has capacity 2 but requested capacity was 3"},
		{NodeDef("b", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{wire.DTInt32}, "shapes", [][]int64{{}}, "shared_name", "x", "capacity", 2)), "Shared queue 'x' has component types int64 but requested component types were int32"},
		{NodeDef("b", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64}, "shapes", [][]int64{{1}}, "shared_name", "x", "capacity", 2)), "Shared queue 'x' has component shapes [[]] but requested component shapes were [[1]]"},
	} {
		_, err := Run(t, env, size(c.q), nil)
		if status.CodeOf(err) != wire.InvalidArgument || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("err = %v, want %q", err, c.msg)
		}
	}
}

// step builds g against env and runs it as step id with ctx, fetching
// fetches.
func step(t *testing.T, ctx context.Context, env *ops.Env, g *tfpb.GraphDef, id int64, fetches ...string) ([]wire.Tensor, error) {
	t.Helper()
	built, err := graph.Build(g, env)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := built.Run(ctx, &tfpb.RunGraphRequest{GraphHandle: "test", StepId: id, RecvKey: fetches}, nil, false)
	env.Rendezvous.Cleanup(id, status.Errorf(wire.Aborted, "step cleaned up"))
	t.Cleanup(func() { tensor.ReleaseAll(out) })
	return out, err
}

// TestSyncReplicasRound runs one round of SyncReplicasOptimizer's ps side
// as separate graphs and steps, the way its masters drive it: the chief's
// take waits in one step while two workers' steps apply their gradients
// and take their tokens from the queue the chief fills after its update.
func TestSyncReplicasRound(t *testing.T) {
	env := NewEnv(t)
	ctx := context.Background()
	acc := denseAcc("acc", "shared_name", "w/grad_accum")
	q := tokenQ("q", "shared_name", "sync_token_q")
	take := GraphDef(acc, q, ConstI32("n", nil, 2),
		NodeDef("take", "ResourceAccumulatorTakeGradient", In("acc", "n"), Attrs("dtype", f32)),
		ConstI64("gs", []int64{2}, 1, 1),
		NodeDef("tokens", "QueueEnqueueManyV2", In("q", "gs", "^take"), Attrs("Tcomponents", []wire.DataType{i64})),
		FetchNode("take/_send", "take", "take:0", f32, Device, Incarnation))
	type result struct {
		out []wire.Tensor
		err error
	}
	chief := make(chan result, 1)
	go func() {
		out, err := step(t, ctx, env, take, 10, FetchKey("take:0", Device, Incarnation))
		chief <- result{out, err}
	}()
	worker := func(id int64, g ...float32) chan result {
		ch := make(chan result, 1)
		go func() {
			out, err := step(t, ctx, env, GraphDef(acc, q, ConstI64("step", nil, 0), ConstF32("g", []int64{2}, g...),
				NodeDef("apply", "ResourceAccumulatorApplyGradient", In("acc", "step", "g"), Attrs("dtype", f32)),
				NodeDef("token", "QueueDequeueV2", In("q", "^apply"), Attrs("component_types", []wire.DataType{i64})),
				FetchNode("token/_send", "token", "token:0", i64, Device, Incarnation)), id, FetchKey("token:0", Device, Incarnation))
			ch <- result{out, err}
		}()
		return ch
	}
	w1, w2 := worker(11, 1, 2), worker(12, 3, 6)
	r := <-chief
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := Floats(&r.out[0]); !slices.Equal(got, []float32{2, 4}) {
		t.Fatalf("chief took %v, want the mean [2 4]", got)
	}
	for _, w := range []chan result{w1, w2} {
		r := <-w
		if r.err != nil || tensor.View[int64](r.out[0].Data)[0] != 1 {
			t.Fatalf("worker's token: %v, %v", r.out, r.err)
		}
	}
}

// TestBlockedStepsEnd: a take or a dequeue waiting in a step ends when the
// step is cancelled, and when another node of its step fails.
func TestBlockedStepsEnd(t *testing.T) {
	env := NewEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() {
		_, err := step(t, ctx, env, GraphDef(denseAcc("acc"), ConstI32("n", nil, 1),
			NodeDef("take", "ResourceAccumulatorTakeGradient", In("acc", "n"), Attrs("dtype", f32))), 1)
		done <- err
	}()
	go func() {
		_, err := step(t, ctx, env, GraphDef(tokenQ("q"), NodeDef("d", "QueueDequeueV2", In("q"), Attrs("component_types", []wire.DataType{i64}))), 2)
		done <- err
	}()
	cancel()
	for range 2 {
		if err := <-done; err == nil {
			t.Fatal("a waiting step of a cancelled context succeeded")
		}
	}
	_, err := step(t, context.Background(), env, GraphDef(tokenQ("q"),
		NodeDef("d", "QueueDequeueV2", In("q"), Attrs("component_types", []wire.DataType{i64})),
		ConstI64("dims", []int64{1}, -1), ConstF32("v", nil, 1),
		NodeDef("bad", "Fill", In("dims", "v"), Attrs("T", f32, "index_type", i64))), 3)
	if status.CodeOf(err) != wire.InvalidArgument {
		t.Fatalf("step with a failing node and a waiting dequeue: %v", err)
	}
}

// TestPrivateQueues: a queue with no shared name belongs to its node, so
// two graphs naming the same node have two queues; a shared name is one
// queue across graphs, until Cleanup drops it.
func TestPrivateQueues(t *testing.T) {
	env := NewEnv(t)
	ctx := context.Background()
	enq := func(q *tfpb.NodeDef) *tfpb.GraphDef {
		return GraphDef(q, ConstI64("x", []int64{3}, 1, 2, 3),
			NodeDef("e", "QueueEnqueueManyV2", In("q", "x"), Attrs("Tcomponents", []wire.DataType{i64})),
			NodeDef("size", "QueueSizeV2", In("q", "^e"), nil),
			FetchNode("size/_send", "size", "size:0", wire.DTInt32, Device, Incarnation))
	}
	sizes := func(g *tfpb.GraphDef, id int64) int32 {
		out, err := step(t, ctx, env, g, id, FetchKey("size:0", Device, Incarnation))
		if err != nil {
			t.Fatal(err)
		}
		return tensor.View[int32](out[0].Data)[0]
	}
	if a, b := sizes(enq(tokenQ("q")), 1), sizes(enq(tokenQ("q")), 2); a != 3 || b != 3 {
		t.Fatalf("private queues of two graphs hold %d and %d", a, b)
	}
	shared := enq(tokenQ("q", "shared_name", "s", "container", "c"))
	if a, b := sizes(shared, 3), sizes(shared, 4); a != 3 || b != 6 {
		t.Fatalf("a shared queue holds %d, then %d", a, b)
	}
	env.Vars.Cleanup([]string{"other"})
	if n := sizes(shared, 5); n != 9 {
		t.Fatalf("Cleanup of another container: %d", n)
	}
	env.Vars.Cleanup([]string{"c"})
	if n := sizes(shared, 6); n != 3 {
		t.Fatalf("after Cleanup of its container the shared queue holds %d", n)
	}
}

// TestRefAccumulatorOps runs the ops of the accumulators whose handle is
// a string ref (what SyncReplicasOptimizer makes for a sparse gradient):
// two IndexedSlices in order, the count, the step, and the averaged rows.
func TestRefAccumulatorOps(t *testing.T) {
	env := NewEnv(t)
	apply := func(name string, dep string, idx []int64, vals ...float32) []*tfpb.NodeDef {
		in := In("acc", "step", name+"/i", name+"/v", "shape")
		if dep != "" {
			in = append(in, "^"+dep)
		}
		return []*tfpb.NodeDef{ConstI64(name+"/i", []int64{int64(len(idx))}, idx...), ConstF32(name+"/v", []int64{int64(len(idx)), 2}, vals...),
			NodeDef(name, "SparseAccumulatorApplyGradient", in, Attrs("dtype", f32, "has_known_shape", true))}
	}
	nodes := []*tfpb.NodeDef{
		NodeDef("acc", "SparseConditionalAccumulator", nil, Attrs("dtype", f32, "shape", []int64{})),
		ConstI64("gs", nil, 3), NodeDef("set", "AccumulatorSetGlobalStep", In("acc", "gs"), nil),
		NodeDef("step", "Identity", In("gs", "^set"), Attrs("T", i64)), ConstI64("shape", []int64{2}, 10, 2),
	}
	nodes = append(nodes, apply("a1", "", []int64{5, 2}, 1, 2, 3, 4)...)
	nodes = append(nodes, apply("a2", "a1", []int64{2, 7}, 5, 6, 7, 8)...)
	nodes = append(nodes, ConstI64("stale", nil, 2), ConstI64("a3/i", []int64{1}, 0), ConstF32("a3/v", []int64{1, 2}, 9, 9),
		NodeDef("a3", "SparseAccumulatorApplyGradient", In("acc", "stale", "a3/i", "a3/v", "shape", "^a2"), Attrs("dtype", f32, "has_known_shape", true)),
		NodeDef("count", "AccumulatorNumAccumulated", In("acc", "^a3"), nil),
		ConstI32("n", nil, 2),
		NodeDef("take", "SparseAccumulatorTakeGradient", In("acc", "n", "^count"), Attrs("dtype", f32)),
		FetchNode("count/_send", "count", "count:0", wire.DTInt32, Device, Incarnation),
		FetchNode("i/_send", "take", "take:0", i64, Device, Incarnation),
		FetchNode("v/_send", "take:1", "take:1", f32, Device, Incarnation),
		FetchNode("s/_send", "take:2", "take:2", i64, Device, Incarnation))
	out, err := step(t, context.Background(), env, GraphDef(nodes...), 1,
		FetchKey("count:0", Device, Incarnation), FetchKey("take:0", Device, Incarnation), FetchKey("take:1", Device, Incarnation), FetchKey("take:2", Device, Incarnation))
	if err != nil {
		t.Fatal(err)
	}
	if n := tensor.View[int32](out[0].Data)[0]; n != 2 {
		t.Fatalf("accumulated %d, want 2 (the gradient of step 2 is stale at step 3)", n)
	}
	// TensorFlow's merge of [5 2] and [2 7]: 2 < 5 first, then 5, 7 —
	// the rows of index 2 never meet.
	if got := tensor.View[int64](out[1].Data); !slices.Equal(got, []int64{2, 5, 2, 7}) {
		t.Fatalf("indices = %v", got)
	}
	if got := Floats(&out[2]); !slices.Equal(got, []float32{5, 6, 1, 2, 3, 4, 7, 8}) {
		t.Fatalf("values = %v", got)
	}
	if got := tensor.View[int64](out[3].Data); !slices.Equal(got, []int64{-1, 2}) {
		t.Fatalf("shape = %v", got)
	}
}
