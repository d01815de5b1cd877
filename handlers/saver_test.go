package handlers

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/rpc"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// psTasks starts n ps tasks sharing the checkpoint directory dir, which
// reach each other through their Resolvers.
func psTasks(t *testing.T, n int, dir string) []*testTask {
	var mu sync.Mutex
	clients := map[string]*rpc.Client{}
	resolve := func(task string) (Caller, error) {
		mu.Lock()
		defer mu.Unlock()
		if cl := clients[task]; cl != nil {
			return cl, nil
		}
		return nil, fmt.Errorf("no task %s", task)
	}
	tasks := make([]*testTask, n)
	for i := range tasks {
		tasks[i] = startTask(t, Options{Job: "ps", Task: i, Incarnation: uint64(10 + i), Resolver: resolve, CheckpointDir: dir})
		mu.Lock()
		clients[tasks[i].w.Task()] = tasks[i].client
		mu.Unlock()
	}
	return tasks
}

// stringProto is strings as a TensorFlow client feeds them: in
// tensor_content, TensorFlow's encoded string list.
func stringProto(shape []int64, vals ...string) *tfpb.TensorProto {
	elems := make([][]byte, len(vals))
	for i, v := range vals {
		elems[i] = []byte(v)
	}
	return &tfpb.TensorProto{Dtype: tfpb.DataType_DT_STRING, TensorShape: tensor.ShapeToProto(shape), TensorContent: tensor.AppendStringList(nil, elems)}
}

// constStrList is a Const of strings held in tensor_content, as a
// TensorFlow client's GraphDefs hold them.
func constStrList(name string, shape []int64, vals ...string) *tfpb.NodeDef {
	return NodeDef(name, "Const", nil, Attrs("dtype", wire.DTString, "value", stringProto(shape, vals...)))
}

// runPartitions registers each task's partition and runs them all as step
// step over gRPC, as a master does, each fed the checkpoint prefix (the
// feed of save/Const) and fetching its fetches; it returns each task's
// fetched tensors.
func runPartitions(t *testing.T, tasks []*testTask, parts []*tfpb.GraphDef, step int64, prefix string, fetches [][]string) [][]*tfpb.TensorProto {
	t.Helper()
	ctx := testCtx(t)
	out := make([][]*tfpb.TensorProto, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, task := range tasks {
		reg, err := task.grpc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{GraphDef: parts[i]})
		if err != nil {
			t.Fatalf("%s: RegisterGraph: %v", task.w.Task(), err)
		}
		req := &tfpb.RunGraphRequest{GraphHandle: reg.GraphHandle, StepId: step,
			Send: []*tfpb.NamedTensorProto{{Name: FeedKey("save/Const:0", task.w.Device()), Tensor: stringProto(nil, prefix)}}}
		for _, f := range fetches[i] {
			req.RecvKey = append(req.RecvKey, FetchKey(f, task.w.Device(), task.w.Incarnation()))
		}
		wg.Go(func() {
			resp, err := task.grpc.RunGraph(ctx, req)
			if err != nil {
				errs[i] = fmt.Errorf("%s: RunGraph: %w", task.w.Task(), err)
				return
			}
			for _, r := range resp.GetRecv() {
				out[i] = append(out[i], r.GetTensor())
			}
		})
	}
	wg.Wait()
	for _, task := range tasks {
		task.grpc.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: step})
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// A psShard is what one ps holds of the model: its variables, their
// values, and the shape_and_slices its Saver shard saves them with.
type psShard struct {
	names, specs []string
	shapes       [][]int64 // the variables' (the parts') shapes
	values       [][]float32
}

// saverShards is a model of a [4,2] embedding partitioned over two ps
// tasks (emb/part_0, emb/part_1) and a scalar on each, as TensorFlow's
// Saver(sharded=True) saves it: each ps saves its own variables, the
// embedding's parts as slices of the whole.
var saverShards = []psShard{
	{names: []string{"a", "emb"}, specs: []string{"", "4 2 0,2:0,2"}, shapes: [][]int64{{}, {2, 2}}, values: [][]float32{{0.5}, {1, 2, 3, 4}}},
	{names: []string{"b", "emb"}, specs: []string{"", "4 2 2,2:0,2"}, shapes: [][]int64{{}, {2, 2}}, values: [][]float32{{3}, {5, 6, 7, 8}}},
}

// varName names the variable of entry j of shard i in the graphs.
func varName(i, j int) string {
	if saverShards[i].names[j] == "emb" {
		return fmt.Sprintf("emb/part_%d", i)
	}
	return saverShards[i].names[j]
}

// saverGraphs returns the partitions of a TF1 sharded Saver's save graph
// over the ps tasks, named as tf.compat.v1.train.Saver(sharded=True)
// names them: the prefix fed to save/Const, save/StringJoin adding
// "_temp/part", save/ShardedFilename per shard, save/SaveV2 per shard, and
// on the last ps save/MergeV2Checkpoints of the packed shard names into
// the prefix. ps 0 holds the nodes that the client's device would (the
// join, num_shards) and sends them to the last.
func saverGraphs(tasks []*testTask) []*tfpb.GraphDef {
	f, s, i32 := wire.DTFloat, wire.DTString, wire.DTInt32
	last := len(tasks) - 1
	dev0, inc0 := tasks[0].w.Device(), tasks[0].w.Incarnation()
	devL := tasks[last].w.Device()
	parts := make([]*tfpb.GraphDef, len(tasks))
	var prefixes []string
	for i, task := range tasks {
		dev := task.w.Device()
		sfx := ""
		if i > 0 {
			sfx = fmt.Sprintf("_%d", i)
		}
		g := GraphDef(FeedNode("save/Const", "save/Const:0", s, dev))
		join, num := "save/StringJoin", "save/num_shards"
		if i == 0 {
			g.Node = append(g.Node,
				ConstStr("save/StringJoin/inputs_1", nil, "_temp/part"),
				NodeDef(join, "StringJoin", In("save/Const", "save/StringJoin/inputs_1"), Attrs("N", 2, "separator", "")),
				ConstI32(num, nil, int32(len(tasks))))
			for j := 1; j < len(tasks); j++ {
				other := tasks[j].w.Device()
				g.Node = append(g.Node,
					SendNode(fmt.Sprintf("%s/_send_%d", join, j), join, "save/StringJoin:0", s, dev0, inc0, other),
					SendNode(fmt.Sprintf("%s/_send_%d", num, j), num, "save/num_shards:0", i32, dev0, inc0, other))
			}
		} else {
			join, num = join+"/_recv", num+"/_recv"
			g.Node = append(g.Node,
				RecvNode(join, "save/StringJoin:0", s, dev0, inc0, dev),
				RecvNode(num, "save/num_shards:0", i32, dev0, inc0, dev))
		}
		shard := saverShards[i]
		inputs := In("save/ShardedFilename"+sfx, "save/SaveV2"+sfx+"/tensor_names", "save/SaveV2"+sfx+"/shape_and_slices")
		for j := range shard.names {
			v := varName(i, j)
			read := fmt.Sprintf("save/ReadVariableOp%s_%d", sfx, j)
			g.Node = append(g.Node,
				NodeDef(v, "VarHandleOp", nil, Attrs("dtype", f, "shape", shard.shapes[j], "shared_name", v)),
				NodeDef(read, "ReadVariableOp", In(v), Attrs("dtype", f)))
			inputs = append(inputs, read)
		}
		g.Node = append(g.Node,
			ConstI32("save/ShardedFilename"+sfx+"/shard", nil, int32(i)),
			NodeDef("save/ShardedFilename"+sfx, "ShardedFilename", In(join, "save/ShardedFilename"+sfx+"/shard", num), nil),
			constStrList("save/SaveV2"+sfx+"/tensor_names", []int64{int64(len(shard.names))}, shard.names...),
			constStrList("save/SaveV2"+sfx+"/shape_and_slices", []int64{int64(len(shard.specs))}, shard.specs...),
			NodeDef("save/SaveV2"+sfx, "SaveV2", inputs, Attrs("dtypes", []wire.DataType{f, f})),
			NodeDef("save/control_dependency"+sfx, "Identity", In("save/ShardedFilename"+sfx, "^save/SaveV2"+sfx), Attrs("T", s)))
		if i != last {
			g.Node = append(g.Node, SendNode("save/control_dependency"+sfx+"/_send", "save/control_dependency"+sfx,
				"save/control_dependency"+sfx+":0", s, dev, task.w.Incarnation(), devL))
			prefixes = append(prefixes, "save/control_dependency"+sfx+"/_recv")
		} else {
			prefixes = append(prefixes, "save/control_dependency"+sfx)
		}
		parts[i] = g
	}
	g := parts[last]
	for i := range last {
		sfx := ""
		if i > 0 {
			sfx = fmt.Sprintf("_%d", i)
		}
		g.Node = append(g.Node, RecvNode("save/control_dependency"+sfx+"/_recv", "save/control_dependency"+sfx+":0", s,
			tasks[i].w.Device(), tasks[i].w.Incarnation(), devL))
	}
	g.Node = append(g.Node,
		NodeDef("save/MergeV2Checkpoints/checkpoint_prefixes", "Pack", prefixes, Attrs("N", len(prefixes), "T", s, "axis", 0)),
		NodeDef("save/MergeV2Checkpoints", "MergeV2Checkpoints", In("save/MergeV2Checkpoints/checkpoint_prefixes", "save/Const"), Attrs("delete_old_dirs", true)),
		NodeDef("save/Identity", "Identity", In("save/Const", "^save/MergeV2Checkpoints"), Attrs("T", s)),
		FetchNode("save/Identity/_send", "save/Identity", "save/Identity:0", s, devL, tasks[last].w.Incarnation()))
	return parts
}

// restoreGraphs returns the partitions of the Saver's restore graph: each
// ps restores its variables with save/RestoreV2 and assigns them, then
// reads them back (fetched as "<variable>/read:0").
func restoreGraphs(tasks []*testTask) ([]*tfpb.GraphDef, [][]string) {
	f := wire.DTFloat
	parts := make([]*tfpb.GraphDef, len(tasks))
	fetches := make([][]string, len(tasks))
	for i, task := range tasks {
		dev := task.w.Device()
		sfx := ""
		if i > 0 {
			sfx = fmt.Sprintf("_%d", i)
		}
		shard := saverShards[i]
		restore := "save/RestoreV2" + sfx
		g := GraphDef(FeedNode("save/Const", "save/Const:0", wire.DTString, dev),
			constStrList(restore+"/tensor_names", []int64{int64(len(shard.names))}, shard.names...),
			constStrList(restore+"/shape_and_slices", []int64{int64(len(shard.specs))}, shard.specs...),
			NodeDef(restore, "RestoreV2", In("save/Const", restore+"/tensor_names", restore+"/shape_and_slices"), Attrs("dtypes", []wire.DataType{f, f})))
		for j := range shard.names {
			v := varName(i, j)
			out := restore
			if j > 0 {
				out = fmt.Sprintf("%s:%d", restore, j)
			}
			assign := fmt.Sprintf("save/AssignVariableOp%s_%d", sfx, j)
			g.Node = append(g.Node,
				NodeDef(v, "VarHandleOp", nil, Attrs("dtype", f, "shape", shard.shapes[j], "shared_name", v)),
				NodeDef(assign, "AssignVariableOp", In(v, out), Attrs("dtype", f)),
				NodeDef(v+"/read", "ReadVariableOp", In(v, "^"+assign), Attrs("dtype", f)),
				FetchNode(v+"/read/_send", v+"/read", v+"/read:0", f, dev, task.w.Incarnation()))
			fetches[i] = append(fetches[i], v+"/read:0")
		}
		parts[i] = g
	}
	return parts, fetches
}

// TestShardedSaverGraph saves two ps tasks' variables with the
// partitions of a TF1 sharded Saver graph, run over RunGraph with the
// prefix fed as a TensorFlow client feeds it, checks the merged
// checkpoint with package checkpoint, and restores it into fresh tasks.
func TestShardedSaverGraph(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "model.ckpt-100")
	tasks := psTasks(t, 2, dir)
	for i, task := range tasks {
		shard := saverShards[i]
		g := GraphDef()
		for j := range shard.names {
			v := varName(i, j)
			g.Node = append(g.Node,
				NodeDef(v, "VarHandleOp", nil, Attrs("dtype", wire.DTFloat, "shape", shard.shapes[j], "shared_name", v)),
				ConstF32(v+"/init", shard.shapes[j], shard.values[j]...),
				NodeDef(v+"/assign", "AssignVariableOp", In(v, v+"/init"), Attrs("dtype", wire.DTFloat)))
		}
		if _, err := runLocal(t, task.w, g, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Step 1 was the initialization's, which runLocal cleaned up.
	out := runPartitions(t, tasks, saverGraphs(tasks), 2, prefix, [][]string{nil, {"save/Identity:0"}})
	if got := out[1][0].GetStringVal(); len(got) != 1 || string(got[0]) != prefix {
		t.Errorf("save/Identity = %v, want the prefix %s", out[1][0], prefix)
	}
	if _, err := os.Stat(prefix + "_temp"); !os.IsNotExist(err) {
		t.Errorf("the shards' directory is left: %v", err)
	}

	r, err := checkpoint.Open(prefix)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, want := range []struct {
		name  string
		shape []int64
		vals  []float32
	}{{"a", nil, []float32{0.5}}, {"b", nil, []float32{3}}, {"emb", []int64{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8}}} {
		got, err := r.Read(want.name)
		if err != nil {
			t.Fatal(err)
		}
		aligned := tensor.Copy(&got)
		if !slices.Equal(got.Shape, want.shape) || !ApproxEqual(Floats(&aligned), want.vals) {
			t.Errorf("%s in the checkpoint: %v%v, want %v%v", want.name, got.Shape, Floats(&aligned), want.shape, want.vals)
		}
		aligned.Buf.Release()
	}

	// Fresh tasks (restarted ps tasks) restore their shards.
	fresh := psTasks(t, 2, dir)
	parts, fetches := restoreGraphs(fresh)
	out = runPartitions(t, fresh, parts, 1, prefix, fetches)
	for i := range fresh {
		for j, p := range out[i] {
			got, err := tensor.FromProto(p)
			if err != nil {
				t.Fatal(err)
			}
			if !ApproxEqual(Floats(&got), saverShards[i].values[j]) || !slices.Equal(got.Shape, saverShards[i].shapes[j]) {
				t.Errorf("ps %d restored %s as %v%v, want %v", i, varName(i, j), got.Shape, Floats(&got), saverShards[i].values[j])
			}
			got.Buf.Release()
		}
	}
}

// TestRestoreTensorFlowCheckpointOverRunGraph restores the checkpoint
// TensorFlow wrote into variables a, b and c of a ps, its prefix fed over
// RunGraph as a TensorFlow client feeds it.
func TestRestoreTensorFlowCheckpointOverRunGraph(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("checkpoint", "testdata", "tf-half-plus-three", "variables")
	for _, name := range []string{checkpoint.IndexFile(src), checkpoint.DataFile(src, 0, 1)} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tasks := psTasks(t, 1, dir)
	dev, inc := tasks[0].w.Device(), tasks[0].w.Incarnation()
	f := wire.DTFloat
	g := GraphDef(FeedNode("save/Const", "save/Const:0", wire.DTString, dev),
		constStrList("save/RestoreV2/tensor_names", []int64{3}, "a", "b", "c"),
		constStrList("save/RestoreV2/shape_and_slices", []int64{3}, "", "", ""),
		NodeDef("save/RestoreV2", "RestoreV2", In("save/Const", "save/RestoreV2/tensor_names", "save/RestoreV2/shape_and_slices"), Attrs("dtypes", []wire.DataType{f, f, f})))
	var fetches []string
	for j, v := range []string{"a", "b", "c"} {
		out := "save/RestoreV2"
		if j > 0 {
			out = fmt.Sprintf("save/RestoreV2:%d", j)
		}
		g.Node = append(g.Node,
			NodeDef(v, "VarHandleOp", nil, Attrs("dtype", f, "shape", []int64{}, "shared_name", v)),
			NodeDef("save/Assign_"+v, "AssignVariableOp", In(v, out), Attrs("dtype", f)),
			NodeDef(v+"/read", "ReadVariableOp", In(v, "^save/Assign_"+v), Attrs("dtype", f)),
			FetchNode(v+"/read/_send", v+"/read", v+"/read:0", f, dev, inc))
		fetches = append(fetches, v+"/read:0")
	}
	// The prefix as a master sends it: relative, taken under the directory.
	out := runPartitions(t, tasks, []*tfpb.GraphDef{g}, 1, "variables", [][]string{fetches})
	for j, want := range []float32{0.5, 3, 3} {
		got, err := tensor.FromProto(out[0][j])
		if err != nil {
			t.Fatal(err)
		}
		if v := Floats(&got); len(v) != 1 || v[0] != want || len(got.Shape) != 0 {
			t.Errorf("variable %d restored as %v%v, want %v", j, got.Shape, v, want)
		}
		got.Buf.Release()
	}
}
