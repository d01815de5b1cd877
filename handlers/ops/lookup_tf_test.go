package ops_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/starwire/starwire/handlers/graph"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/ops"
	"github.com/starwire/starwire/handlers/rendezvous"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/status"
	"github.com/starwire/starwire/wire/tfpb"
)

// The steps TensorFlow 2.21 ran on its own ps, with the ps partitions its
// master registered for them and what they fetched: written by
// testdata/lookup/gen.py, replayed here on a starwire ps.
const lookupData = "testdata/lookup"

// A tfStep is one step of steps.json.
type tfStep struct {
	Name       string              `json:"name"`
	Graph      string              `json:"graph"`
	Feeds      map[string]tfTensor `json:"feeds"`
	Fetches    []string            `json:"fetches"`
	Unordered  bool                `json:"unordered"`
	Want       json.RawMessage     `json:"want"`
	Error      *tfError            `json:"error"`
	PrefixFeed string              `json:"prefix_feed"`
}

type tfError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// A tfTensor is a tensor as gen.py writes it.
type tfTensor struct {
	DType   string        `json:"dtype"`
	Shape   []int64       `json:"shape"`
	Values  []json.Number `json:"values"`  // exact, for int64s past 2^53
	Strings []string      `json:"strings"` // base64
}

// proto returns t as a TensorProto.
func (t tfTensor) proto(tb testing.TB) *tfpb.TensorProto {
	p := &tfpb.TensorProto{TensorShape: tensor.ShapeToProto(t.Shape)}
	for _, v := range t.Values {
		var err error
		var i int64
		var f float64
		switch t.DType {
		case "int64":
			i, err = v.Int64()
			p.Dtype, p.Int64Val = tfpb.DataType_DT_INT64, append(p.Int64Val, i)
		case "int32":
			i, err = v.Int64()
			p.Dtype, p.IntVal = tfpb.DataType_DT_INT32, append(p.IntVal, int32(i))
		case "float":
			f, err = v.Float64()
			p.Dtype, p.FloatVal = tfpb.DataType_DT_FLOAT, append(p.FloatVal, float32(f))
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	switch t.DType {
	case "int64", "int32", "float":
		p.Dtype = map[string]tfpb.DataType{"int64": tfpb.DataType_DT_INT64, "int32": tfpb.DataType_DT_INT32, "float": tfpb.DataType_DT_FLOAT}[t.DType]
	case "string":
		p.Dtype = tfpb.DataType_DT_STRING
		for _, s := range t.Strings {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				tb.Fatal(err)
			}
			p.StringVal = append(p.StringVal, b)
		}
	default:
		tb.Fatalf("dtype %q", t.DType)
	}
	return p
}

// tensor returns t as a tensor the caller releases.
func (t tfTensor) tensor(tb testing.TB) wire.Tensor {
	w, err := tensor.FromProto(t.proto(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

// loadSteps reads steps.json.
func loadSteps(t testing.TB) []tfStep {
	b, err := os.ReadFile(filepath.Join(lookupData, "steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Steps []tfStep `json:"steps"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f.Steps
}

// loadPartition reads the ps partition of graph name.
func loadPartition(t testing.TB, name string) *tfpb.GraphDef {
	b, err := os.ReadFile(filepath.Join(lookupData, "graphs", name+".pbtxt"))
	if err != nil {
		t.Fatal(err)
	}
	g := &tfpb.GraphDef{}
	if err := prototext.Unmarshal(b, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// partitionKeys returns the rendezvous keys of what a ps partition
// receives from the worker and sends to it, by tensor name: TensorFlow's
// master feeds and fetches on the worker, which moves them to and from
// the ps.
func partitionKeys(g *tfpb.GraphDef) (recvs, sends map[string]string) {
	recvs, sends = map[string]string{}, map[string]string{}
	for _, n := range g.GetNode() {
		a := n.GetAttr()
		key := rendezvous.CreateKey(string(a["send_device"].GetS()), uint64(a["send_device_incarnation"].GetI()),
			string(a["recv_device"].GetS()), string(a["tensor_name"].GetS()), rendezvous.FrameIter{})
		switch n.GetOp() {
		case "_Recv", "_HostRecv":
			// From the worker's feed of "x:0", its node "_recv_x_0".
			recvs[string(a["_src"].GetS())] = key
		case "_Send", "_HostSend":
			in := n.GetInput()[0]
			if !strings.Contains(in, ":") {
				in += ":0"
			}
			sends[in] = key
		}
	}
	return recvs, sends
}

// A replay runs steps on one ps Env, building each partition once, as a
// worker registers it once. The worker's side is the replay: it answers
// the partition's receives with the step's feeds, and takes what the
// partition sends it out of the ps's rendezvous.
type replay struct {
	env    *ops.Env
	graphs map[string]*graph.Graph
	step   int64
	prefix string // the checkpoint prefix the save and restore steps are fed

	mu    sync.Mutex
	feeds map[string]wire.Tensor // the step's, by rendezvous key
}

func newReplay(env *ops.Env) *replay {
	r := &replay{env: env, graphs: map[string]*graph.Graph{}, prefix: "model.ckpt"}
	env.RemoteRecv = func(_ context.Context, task string, step int64, key string) (wire.Tensor, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		f, ok := r.feeds[key]
		if !ok || task != "/job:worker/replica:0/task:0" || step != r.step {
			return wire.Tensor{}, status.Errorf(wire.NotFound, "worker %s has no tensor %q in step %d", task, key, step)
		}
		f = tensor.Ref(f)
		f.Shape = slices.Clone(f.Shape)
		return f, nil
	}
	return r
}

// run runs step s and checks its fetches, or its error, against
// TensorFlow's.
func (r *replay) run(t *testing.T, s tfStep) {
	t.Helper()
	gd := loadPartition(t, s.Graph)
	g := r.graphs[s.Graph]
	if g == nil {
		var err error
		if g, err = graph.Build(gd, r.env); err != nil {
			t.Fatalf("step %q: build %s: %v", s.Name, s.Graph, err)
		}
		r.graphs[s.Graph] = g
	}
	recvs, sends := partitionKeys(gd)
	feeds := map[string]wire.Tensor{}
	defer func() {
		for _, f := range feeds {
			f.Buf.Release()
		}
	}()
	addFeed := func(name string, tt wire.Tensor) {
		key, ok := recvs["_recv_"+strings.ReplaceAll(name, ":", "_")]
		if !ok {
			t.Fatalf("step %q: partition %s receives no %s", s.Name, s.Graph, name)
		}
		feeds[key] = tt
	}
	for name, f := range s.Feeds {
		addFeed(name, f.tensor(t))
	}
	if s.PrefixFeed != "" {
		addFeed(s.PrefixFeed, tfTensor{DType: "string", Strings: []string{base64.StdEncoding.EncodeToString([]byte(r.prefix))}}.tensor(t))
	}
	r.mu.Lock()
	r.step++
	r.feeds = feeds
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), Settle)
	defer cancel()
	_, _, err := g.Run(ctx, &tfpb.RunGraphRequest{GraphHandle: s.Graph, StepId: r.step}, nil, false)
	var out []wire.Tensor
	defer func() { tensor.ReleaseAll(out) }()
	for _, f := range s.Fetches {
		key, ok := sends[f]
		if !ok {
			t.Fatalf("step %q: partition %s sends no %s", s.Name, s.Graph, f)
		}
		if err != nil {
			break
		}
		var v wire.Tensor
		if v, _, err = r.env.Rendezvous.Recv(ctx, r.step, key); err == nil {
			out = append(out, v)
		}
	}
	r.env.Rendezvous.Cleanup(r.step, status.Errorf(wire.Aborted, "step done"))
	if s.Error != nil {
		checkTFError(t, s, err)
		return
	}
	if err != nil {
		t.Fatalf("step %q: %v", s.Name, err)
	}
	if string(s.Want) == `"prefix"` {
		got, err := out[0].Strings(nil)
		if err != nil || len(got) != 1 || string(got[0]) != r.prefix {
			t.Fatalf("step %q: fetched %q (%v), want the prefix %q", s.Name, got, err, r.prefix)
		}
		return
	}
	var want []tfTensor
	d := json.NewDecoder(bytes.NewReader(s.Want))
	d.UseNumber()
	if err := d.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if len(out) != len(want) {
		t.Fatalf("step %q: %d fetches, want %d", s.Name, len(out), len(want))
	}
	wts := make([]wire.Tensor, len(want))
	for i := range want {
		wts[i] = want[i].tensor(t)
	}
	defer tensor.ReleaseAll(wts)
	got := out
	if s.Unordered {
		got, wts = sortedRows(t, out), sortedRows(t, wts)
	}
	for i := range wts {
		if got[i].DType != wts[i].DType || !slices.Equal(got[i].Shape, wts[i].Shape) || !bytes.Equal(got[i].Data, wts[i].Data) {
			t.Errorf("step %q: fetch %s:\n got %v\nwant %v", s.Name, s.Fetches[i], describe(&got[i]), describe(&wts[i]))
		}
	}
}

// checkTFError checks that err has TensorFlow's code and says what
// TensorFlow said, naming the table.
func checkTFError(t *testing.T, s tfStep, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("step %q: no error, TensorFlow's was %q", s.Name, s.Error.Message)
	}
	if int(status.CodeOf(err)) != s.Error.Code {
		t.Fatalf("step %q: error %v has code %v, TensorFlow's %d", s.Name, err, status.CodeOf(err), s.Error.Code)
	}
	if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(s.Error.Message)) || !strings.Contains(err.Error(), "table ") {
		t.Fatalf("step %q: error %q, want TensorFlow's %q naming the table", s.Name, err, s.Error.Message)
	}
}

// sortedRows returns an export's keys and values in key order:
// TensorFlow's MutableHashTable exports in an order of its own.
func sortedRows(t *testing.T, kv []wire.Tensor) []wire.Tensor {
	keys, values := &kv[0], &kv[1]
	n := int(keys.Shape[0])
	var elems [][]byte
	if keys.DType == wire.DTString {
		var err error
		if elems, err = keys.Strings(nil); err != nil {
			t.Fatal(err)
		}
	} else {
		w := keys.DType.Size()
		for i := range n {
			elems = append(elems, keys.Data[i*w:(i+1)*w])
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return bytes.Compare(elems[order[a]], elems[order[b]]) < 0 })
	var vrows [][]byte
	if values.DType == wire.DTString {
		all, err := values.Strings(nil)
		if err != nil {
			t.Fatal(err)
		}
		per := len(all) / max(n, 1)
		for i := range n {
			vrows = append(vrows, wire.AppendStrings(nil, all[i*per:(i+1)*per]))
		}
	} else {
		per := len(values.Data) / max(n, 1)
		for i := range n {
			vrows = append(vrows, values.Data[i*per:(i+1)*per])
		}
	}
	out := []wire.Tensor{{DType: keys.DType, Shape: keys.Shape}, {DType: values.DType, Shape: values.Shape}}
	var sortedKeys [][]byte
	for _, i := range order {
		sortedKeys = append(sortedKeys, elems[i])
		out[1].Data = append(out[1].Data, vrows[i]...)
	}
	if keys.DType == wire.DTString {
		out[0].Data = wire.AppendStrings(nil, sortedKeys)
	} else {
		out[0].Data = bytes.Join(sortedKeys, nil)
	}
	return out
}

// describe prints a tensor's elements for a failure message.
func describe(t *wire.Tensor) string {
	var b strings.Builder
	b.WriteString(t.DType.String())
	b.WriteString(fmtSlice(t.Shape))
	b.WriteString(" ")
	switch t.DType {
	case wire.DTFloat:
		b.WriteString(fmtSlice(tensor.View[float32](t.Data)))
	case wire.DTInt64:
		b.WriteString(fmtSlice(tensor.View[int64](t.Data)))
	case wire.DTString:
		s, _ := t.Strings(nil)
		b.WriteString(fmtSlice(s))
	default:
		b.WriteString(fmtSlice(t.Data))
	}
	return b.String()
}

func fmtSlice[T any](s []T) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	_ = enc.Encode(s)
	return strings.TrimSpace(b.String())
}

// TestLookupTablesAsTensorFlow replays every step TensorFlow ran: inserts,
// lookups with shared and per-key defaults, removes, sizes and exports of
// its three table ops (int64 to float vectors, string to int64, int64 to
// string, dense tables of int64, vector and string keys), TensorFlow's
// errors for a value shape and the empty and deleted keys, then a
// sharded Saver's save, changes, and a restore, each fetch equal to
// TensorFlow's: dense tables' buckets exactly, hash tables' rows in any
// order.
func TestLookupTablesAsTensorFlow(t *testing.T) {
	r := newReplay(NewEnv(t))
	for _, s := range loadSteps(t) {
		r.run(t, s)
	}
}

// TestRestoreTensorFlowTableCheckpoint restores the checkpoint
// TensorFlow's Saver wrote for the tables into a fresh ps, and looks up
// what TensorFlow looked up after its own restore.
func TestRestoreTensorFlowTableCheckpoint(t *testing.T) {
	env := NewEnv(t)
	copyDir(t, filepath.Join(lookupData, "ckpt"), env.CheckpointDir)
	r := newReplay(env)
	restored := false
	for _, s := range loadSteps(t) {
		if s.Name == "restore" {
			restored = true
		}
		if restored {
			r.run(t, s)
		}
	}
	if !restored {
		t.Fatal("no restore step")
	}
}

// TestTableCheckpointForTensorFlow replays the steps up to the save, so
// that the ps writes the checkpoint TensorFlow saved; with
// STARWIRE_TABLE_CHECKPOINT_DIR set it copies it there, for
// testdata/lookup/check_tf_reads.py to restore in TensorFlow.
func TestTableCheckpointForTensorFlow(t *testing.T) {
	env := NewEnv(t)
	r := newReplay(env)
	saved := false
	for _, s := range loadSteps(t) {
		r.run(t, s)
		if s.Name == "save" {
			saved = true
			break
		}
	}
	if !saved {
		t.Fatal("no save step")
	}
	if _, err := os.Stat(filepath.Join(env.CheckpointDir, "model.ckpt.index")); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("STARWIRE_TABLE_CHECKPOINT_DIR"); dir != "" {
		copyDir(t, env.CheckpointDir, dir)
	}
}

// copyDir copies the files of src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
