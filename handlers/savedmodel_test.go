package handlers

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/starwire/starwire/handlers/checkpoint"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// loadSavedModelGraph reads testdata/savedmodel-half-plus-three.pbtxt, the
// graph a TensorFlow 2 SavedModel of y = a·x + b exports: its save,
// restore and serving functions called through nested
// StatefulPartitionedCalls.
func loadSavedModelGraph(t *testing.T) *tfpb.GraphDef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "savedmodel-half-plus-three.pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	g := new(tfpb.GraphDef)
	if err := prototext.Unmarshal(b, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// prune keeps the nodes targets need, as a master prunes a client's graph
// to a step's fetches and targets before registering it; the library stays.
func prune(g *tfpb.GraphDef, targets ...string) *tfpb.GraphDef {
	byName := make(map[string]*tfpb.NodeDef, len(g.GetNode()))
	for _, n := range g.GetNode() {
		byName[n.GetName()] = n
	}
	keep := make(map[string]bool)
	for todo := slices.Clone(targets); len(todo) > 0; {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if keep[name] {
			continue
		}
		keep[name] = true
		for _, in := range byName[name].GetInput() {
			src, _, _ := cutPort(in)
			todo = append(todo, src)
		}
	}
	out := &tfpb.GraphDef{Library: g.GetLibrary(), Versions: g.GetVersions()}
	for _, n := range g.GetNode() {
		if keep[n.GetName()] {
			out.Node = append(out.Node, n)
		}
	}
	return out
}

// cutPort splits "^node", "node:1" or "node" into the node's name.
func cutPort(in string) (string, string, bool) {
	if in != "" && in[0] == '^' {
		return in[1:], "", false
	}
	for i := len(in) - 1; i >= 0; i-- {
		if in[i] == ':' {
			return in[:i], in[i+1:], true
		}
	}
	return in, "", false
}

// savedModelSession runs steps of the SavedModel graph in one isolated
// session of a task over gRPC, as a TensorFlow master runs a client's
// session.run calls: the graph pruned to the step, its feeds and fetch
// rewritten into client-terminated _Recv and _Send nodes, the tensors in
// TensorProtos.
type savedModelSession struct {
	t      *testing.T
	task   *testTask
	handle string
	def    *tfpb.GraphDef
	step   int64
}

func newSavedModelSession(t *testing.T, task *testTask, handle string, def *tfpb.GraphDef) *savedModelSession {
	t.Helper()
	req := &tfpb.CreateWorkerSessionRequest{SessionHandle: handle, IsolateSessionState: true}
	if _, err := task.grpc.CreateWorkerSession(testCtx(t), req); err != nil {
		t.Fatal(err)
	}
	return &savedModelSession{t: t, task: task, handle: handle, def: def}
}

// run registers the graph pruned to fetch's node, with feeds and fetch as
// the master rewrites them, runs it and returns the fetched tensor.
func (s *savedModelSession) run(fetch string, feeds map[string]*tfpb.TensorProto, fetchType wire.DataType) wire.Tensor {
	s.t.Helper()
	ctx := testCtx(s.t)
	dev, inc := s.task.w.Device(), s.task.w.Incarnation()
	node, _, _ := cutPort(fetch)
	g := prune(s.def, node)
	for i, n := range g.Node {
		if p := feeds[n.GetName()]; p != nil {
			g.Node[i] = FeedNode(n.GetName(), n.GetName()+":0", wire.DataType(p.GetDtype()), dev)
		}
	}
	g.Node = append(g.Node, FetchNode(node+"/_send", fetch, fetch, fetchType, dev, inc))
	reg, err := s.task.grpc.RegisterGraph(ctx, &tfpb.RegisterGraphRequest{SessionHandle: s.handle, CreateWorkerSessionCalled: true, GraphDef: g})
	if err != nil {
		s.t.Fatalf("RegisterGraph for %s: %v", fetch, err)
	}
	s.step++
	req := &tfpb.RunGraphRequest{SessionHandle: s.handle, CreateWorkerSessionCalled: true, GraphHandle: reg.GetGraphHandle(),
		StepId: s.step, RecvKey: []string{FetchKey(fetch, dev, inc)}}
	for name, p := range feeds {
		req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: FeedKey(name+":0", dev), Tensor: p})
	}
	resp, err := s.task.grpc.RunGraph(ctx, req)
	if err != nil {
		s.t.Fatalf("RunGraph fetching %s: %v", fetch, err)
	}
	if _, err := s.task.grpc.CleanupGraph(ctx, &tfpb.CleanupGraphRequest{StepId: s.step}); err != nil {
		s.t.Fatal(err)
	}
	out, err := tensor.FromProto(resp.GetRecv()[0].GetTensor())
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { out.Buf.Release() })
	return out
}

func wantString(t *testing.T, what string, got wire.Tensor, want string) {
	t.Helper()
	elems, err := got.Strings(nil)
	if err != nil || len(got.Shape) != 0 || string(elems[0]) != want {
		t.Fatalf("%s = %q%v (%v), want %q", what, elems, got.Shape, err, want)
	}
}

// restore runs the SaverDef's restore op on prefix; its result is the
// prefix read.
func (s *savedModelSession) restore(prefix string) {
	s.t.Helper()
	wantString(s.t, "restore of "+prefix, s.run("StatefulPartitionedCall_2:0", map[string]*tfpb.TensorProto{"saver_filename": stringProto(nil, prefix)}, wire.DTString), prefix)
}

// save runs the SaverDef's save tensor on prefix; its result is the
// prefix written.
func (s *savedModelSession) save(prefix string) {
	s.t.Helper()
	wantString(s.t, "save to "+prefix, s.run("StatefulPartitionedCall_1:0", map[string]*tfpb.TensorProto{"saver_filename": stringProto(nil, prefix)}, wire.DTString), prefix)
}

// serve runs the serving signature on x = [1, 2, 5]: a·x + b.
func (s *savedModelSession) serve() {
	s.t.Helper()
	x := &tfpb.TensorProto{Dtype: tfpb.DataType_DT_FLOAT, TensorShape: tensor.ShapeToProto([]int64{3}), FloatVal: []float32{1, 2, 5}}
	y := s.run("StatefulPartitionedCall:0", map[string]*tfpb.TensorProto{"serving_default_x": x}, wire.DTFloat)
	if y.DType != wire.DTFloat || !slices.Equal(y.Shape, []int64{3}) || !ApproxEqual(Floats(&y), []float32{3.5, 4, 5.5}) {
		s.t.Fatalf("y = %v%v %v, want [3.5 4 5.5]", y.DType, y.Shape, Floats(&y))
	}
}

// TestSavedModelRestoreServeSave runs a TensorFlow 2 SavedModel's graph as
// a TensorFlow master would on a ps task, over gRPC: restore TensorFlow's
// own checkpoint of half_plus_three through the SaverDef's restore op,
// serve, save through the SaverDef's save tensor, and check the saved
// bundle and that it restores.
func TestSavedModelRestoreServeSave(t *testing.T) {
	dir := t.TempDir()
	task := startTask(t, Options{Job: "ps", Task: 0, Incarnation: 7, CheckpointDir: dir})
	tfPrefix := filepath.Join(dir, "tf", "variables")
	copyTFCheckpoint(t, filepath.Join("checkpoint", "testdata", "tf-half-plus-three", "variables"), tfPrefix)
	def := loadSavedModelGraph(t)

	s := newSavedModelSession(t, task, "tf2", def)
	s.restore(tfPrefix)
	s.serve()

	// The shard is merged into the prefix and its temporary directory
	// removed.
	saved := filepath.Join(dir, "export", "ckpt-1")
	s.save(saved)
	if _, err := os.Stat(saved + "_temp"); !os.IsNotExist(err) {
		t.Fatalf("%s_temp after the save: %v, want it removed", saved, err)
	}
	r, err := checkpoint.Open(saved)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, v := range []struct {
		name string
		want float32
	}{{"a", 0.5}, {"b", 3}, {"c", 3}} {
		got, err := r.Read(v.name)
		if err != nil {
			t.Fatalf("saved %s: %v", v.name, err)
		}
		if got.DType != wire.DTFloat || len(got.Shape) != 0 || Floats(&got)[0] != v.want {
			t.Fatalf("saved %s = %v%v %v, want float scalar %v", v.name, got.DType, got.Shape, Floats(&got), v.want)
		}
		got.Buf.Release()
	}
	objects, err := r.Read("_CHECKPOINTABLE_OBJECT_GRAPH")
	if err != nil {
		t.Fatal(err)
	}
	defer objects.Buf.Release()
	constNode := def.GetNode()[slices.IndexFunc(def.GetNode(), func(n *tfpb.NodeDef) bool { return n.GetName() == "Const" })]
	wantString(t, "saved object graph", objects, string(constNode.GetAttr()["value"].GetTensor().GetStringVal()[0]))

	// The saved bundle restores, in a session of its own, to the same
	// model.
	again := newSavedModelSession(t, task, "tf2-again", def)
	again.restore(saved)
	again.serve()
}

// copyTFCheckpoint copies the one-shard checkpoint src to dst.
func copyTFCheckpoint(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []func(string) string{checkpoint.IndexFile, func(p string) string { return checkpoint.DataFile(p, 0, 1) }} {
		b, err := os.ReadFile(name(src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name(dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
