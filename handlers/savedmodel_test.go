package handlers

import (
	"context"
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

// stringScalar is a string scalar to feed.
func stringScalar(s string) wire.Tensor {
	return wire.Tensor{DType: wire.DTString, Data: wire.AppendStrings(nil, [][]byte{[]byte(s)})}
}

// savedModelSession runs pruned steps of the SavedModel graph in one
// session of a worker, as a TensorFlow master does with a client's
// session.run calls.
type savedModelSession struct {
	*sessionRunner
	handle string
	def    *tfpb.GraphDef
}

// step registers the graph pruned to fetch's node, runs it with feeds and
// returns the fetched tensor.
func (s *savedModelSession) step(fetch string, feeds map[string]wire.Tensor) wire.Tensor {
	s.t.Helper()
	node, _, _ := cutPort(fetch)
	reg, err := s.w.registerGraph(&tfpb.RegisterGraphRequest{SessionHandle: s.handle, CreateWorkerSessionCalled: true, GraphDef: prune(s.def, node)})
	if err != nil {
		s.t.Fatalf("RegisterGraph for %s: %v", fetch, err)
	}
	s.sessionRunner.step++
	req := &tfpb.RunGraphRequest{SessionHandle: s.handle, CreateWorkerSessionCalled: true, GraphHandle: reg.GetGraphHandle(), StepId: s.sessionRunner.step, RecvKey: []string{fetch}}
	var ts []wire.Tensor
	for name, t := range feeds {
		req.Send = append(req.Send, &tfpb.NamedTensorProto{Name: name})
		ts = append(ts, t)
	}
	_, out, err := s.w.runGraph(context.Background(), req, ts)
	s.w.rendezvous.Cleanup(req.StepId, errStepCleaned)
	if err != nil {
		s.t.Fatalf("RunGraph fetching %s: %v", fetch, err)
	}
	s.t.Cleanup(func() { tensor.ReleaseAll(out) })
	return out[0]
}

func (s *savedModelSession) wantString(what string, got wire.Tensor, want string) {
	s.t.Helper()
	elems, err := got.Strings(nil)
	if err != nil || len(got.Shape) != 0 || string(elems[0]) != want {
		s.t.Fatalf("%s = %q%v (%v), want %q", what, elems, got.Shape, err, want)
	}
}

// serve runs the serving signature on x = [1, 2, 5]: a·x + b.
func (s *savedModelSession) serve() {
	s.t.Helper()
	y := s.step("StatefulPartitionedCall:0", map[string]wire.Tensor{"serving_default_x": F32([]int64{3}, 1, 2, 5)})
	if y.DType != wire.DTFloat || !slices.Equal(y.Shape, []int64{3}) || !ApproxEqual(Floats(&y), []float32{3.5, 4, 5.5}) {
		s.t.Fatalf("y = %v%v %v, want [3.5 4 5.5]", y.DType, y.Shape, Floats(&y))
	}
}

// TestSavedModelRestoreServeSave runs a TensorFlow 2 SavedModel's graph as
// a TensorFlow master would on a ps task: restore TensorFlow's own
// checkpoint of half_plus_three through the SaverDef's restore op, serve,
// save through the SaverDef's save tensor, and check the saved bundle and
// that it restores.
func TestSavedModelRestoreServeSave(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWorker(Options{Job: "ps", Task: 0, Incarnation: 7, CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tfPrefix := filepath.Join(dir, "tf", "variables")
	copyTFCheckpoint(t, filepath.Join("checkpoint", "testdata", "tf-half-plus-three", "variables"), tfPrefix)
	def := loadSavedModelGraph(t)
	runner := &sessionRunner{t: t, w: w}
	runner.create("tf2", true)
	s := &savedModelSession{sessionRunner: runner, handle: "tf2", def: def}

	// Restore: the restore op's result is the prefix it read.
	s.wantString("restore", s.step("StatefulPartitionedCall_2:0", map[string]wire.Tensor{"saver_filename": stringScalar(tfPrefix)}), tfPrefix)
	s.serve()

	// Save: the save tensor is the prefix written, the shard merged into
	// it and its temporary directory gone.
	saved := filepath.Join(dir, "export", "ckpt-1")
	s.wantString("save", s.step("StatefulPartitionedCall_1:0", map[string]wire.Tensor{"saver_filename": stringScalar(saved)}), saved)
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
	graph, err := r.Read("_CHECKPOINTABLE_OBJECT_GRAPH")
	if err != nil {
		t.Fatal(err)
	}
	defer graph.Buf.Release()
	want := def.GetNode()[slices.IndexFunc(def.GetNode(), func(n *tfpb.NodeDef) bool { return n.GetName() == "Const" })].GetAttr()["value"].GetTensor().GetStringVal()[0]
	s.wantString("saved object graph", graph, string(want))

	// The saved bundle restores, in a session of its own, to the same
	// model.
	runner.create("tf2-again", true)
	again := &savedModelSession{sessionRunner: runner, handle: "tf2-again", def: def}
	again.wantString("restore of the saved bundle", again.step("StatefulPartitionedCall_2:0", map[string]wire.Tensor{"saver_filename": stringScalar(saved)}), saved)
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
