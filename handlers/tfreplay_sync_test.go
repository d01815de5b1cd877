package handlers

import (
	"slices"
	"testing"

	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// TestReplayTF1SyncReplicas replays what two TensorFlow 2.21 masters sent
// ps 0 under SyncReplicasOptimizer (interop/tf/record_sync.py): both
// sessions, the chief's init steps (its accumulators' global step, the
// first tokens in sync_token_q) and every partition up to each worker's
// training partition, whose accumulators, token queue and their ops must
// register. Then graphs of its own reach, by their shared names, the
// queue and an accumulator that the recorded graphs made.
func TestReplayTF1SyncReplicas(t *testing.T) {
	const dir = "testdata/tf1-sync-ps0"
	inc := recordedIncarnation(t, dir)
	w, err := NewWorker(Options{Job: "ps", Task: 0, CheckpointDir: t.TempDir(), Resolver: noPeers, Incarnation: inc})
	if err != nil {
		t.Fatal(err)
	}
	// Eleven steps came; the chief queue runner's (which takes the
	// averaged gradients) and the workers' training steps take tensors
	// from the workers and are the ones not run.
	if ran := replay(t, w, dir); ran != 10 {
		t.Errorf("replay ran %d steps, want 10", ran)
	}
	i64 := wire.DTInt64
	tokens := GraphDef(
		NodeDef("q", "FIFOQueueV2", nil, Attrs("component_types", []wire.DataType{i64}, "shapes", [][]int64{{}}, "shared_name", "sync_token_q")),
		NodeDef("size", "QueueSizeV2", In("q"), nil),
		ConstI32("n", nil, 2),
		NodeDef("take", "QueueDequeueManyV2", In("q", "n", "^size"), Attrs("component_types", []wire.DataType{i64})),
		FetchNode("size/_send", "size", "size:0", wire.DTInt32, Device, inc),
		FetchNode("take/_send", "take", "take:0", i64, Device, inc),
	)
	out, err := runLocal(t, w, tokens, nil, FetchKey("size:0", Device, inc), FetchKey("take:0", Device, inc))
	if err != nil {
		t.Fatal(err)
	}
	if size, got := tensor.View[int32](out[0].Data)[0], tensor.View[int64](out[1].Data); size != 2 || !slices.Equal(got, []int64{0, 0}) {
		t.Fatalf("sync_token_q held %d tokens, dequeued %v; want the chief's two of global step 0", size, got)
	}
	f := wire.DTFloat
	grads := GraphDef(
		NodeDef("acc", "ResourceConditionalAccumulator", nil, Attrs("dtype", f, "shape", []int64{1}, "shared_name", "dense/bias:0/grad_accum")),
		ConstI64("step", nil, 0),
		ConstF32("g", []int64{1}, 4),
		NodeDef("apply", "ResourceAccumulatorApplyGradient", In("acc", "step", "g"), Attrs("dtype", f)),
		ConstI32("one", nil, 1),
		NodeDef("take", "ResourceAccumulatorTakeGradient", In("acc", "one", "^apply"), Attrs("dtype", f)),
		FetchNode("take/_send", "take", "take:0", f, Device, inc),
	)
	out, err = runLocal(t, w, grads, nil, FetchKey("take:0", Device, inc))
	if err != nil {
		t.Fatal(err)
	}
	if got := Floats(&out[0]); !slices.Equal(got, []float32{4}) {
		t.Fatalf("bias accumulator gave %v, want [4]", got)
	}
	// CleanupAll drops the queue: the same graph finds a new, empty one.
	w.cleanupAll(&tfpb.CleanupAllRequest{})
	size := GraphDef(tokens.Node[0], tokens.Node[1], tokens.Node[4])
	out, err = runLocal(t, w, size, nil, FetchKey("size:0", Device, inc))
	if err != nil {
		t.Fatal(err)
	}
	if n := tensor.View[int32](out[0].Data)[0]; n != 0 {
		t.Fatalf("after CleanupAll sync_token_q holds %d tokens", n)
	}
}
