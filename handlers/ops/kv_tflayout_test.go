package ops_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	. "github.com/starwire/starwire/handlers/internal/graphtest"
	"github.com/starwire/starwire/handlers/tensor"
	"github.com/starwire/starwire/wire"
	"github.com/starwire/starwire/wire/tfpb"
)

// testdata/ev_checkpoint is a checkpoint of `starwire train --embedding
// hash --filter_freq 2` on two ps (embedding_dim 2), and layout.json what
// TensorFlow 2.21's reader listed of it: the name, dtype and shape of every
// tensor. interop/tf/test_ev_checkpoints.py checks the checkpoint with
// TensorFlow and, with STARWIRE_EV_TESTDATA set to the directory, writes
// both again.
const (
	evTestdata = "testdata/ev_checkpoint"
	evPieces   = 2
	evFilter   = 2
)

// A tensorLayout is one tensor of a checkpoint as a reader lists it.
type tensorLayout struct {
	Name  string
	DType wire.DataType
	Shape []int64
}

// tfLayout returns what TensorFlow listed of testdata/ev_checkpoint, and
// the checkpoint's prefix.
func tfLayout(t *testing.T) ([]tensorLayout, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(evTestdata, "layout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Prefix  string
		Tensors []struct {
			Name  string
			Enum  int32 `json:"dtype_enum"`
			Shape []int64
		}
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	var out []tensorLayout
	for _, x := range l.Tensors {
		out = append(out, tensorLayout{x.Name, wire.DataType(x.Enum), x.Shape})
	}
	if len(out) == 0 || l.Prefix == "" {
		t.Fatalf("%s/layout.json lists no tensors", evTestdata)
	}
	return out, l.Prefix
}

// layoutOf lists r's tensors as TensorFlow's reader does, by name.
func layoutOf(r *checkpoint.Reader) []tensorLayout {
	var out []tensorLayout
	for _, e := range r.Entries() {
		out = append(out, tensorLayout{e.Name, e.DType, e.Shape})
	}
	slices.SortFunc(out, func(a, b tensorLayout) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

func diffLayouts(t *testing.T, what string, got, want []tensorLayout) {
	t.Helper()
	g := map[string]tensorLayout{}
	for _, x := range got {
		g[x.Name] = x
	}
	for _, w := range want {
		x, ok := g[w.Name]
		switch {
		case !ok:
			t.Errorf("%s: no tensor %s (TensorFlow read %v %v)", what, w.Name, w.DType, w.Shape)
		case x.DType != w.DType || !slices.Equal(x.Shape, w.Shape):
			t.Errorf("%s: tensor %s is %v %v, TensorFlow read %v %v", what, w.Name, x.DType, x.Shape, w.DType, w.Shape)
		}
		delete(g, w.Name)
	}
	for name, x := range g {
		t.Errorf("%s: tensor %s (%v %v) that TensorFlow did not read", what, name, x.DType, x.Shape)
	}
}

// evCopy copies testdata/ev_checkpoint's checkpoint into a fresh
// directory, where a ps may read it and write beside it.
func evCopy(t *testing.T, prefix string) string {
	t.Helper()
	dir := t.TempDir()
	files, err := filepath.Glob(filepath.Join(evTestdata, prefix+".*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no checkpoint %s in %s: %v", prefix, evTestdata, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// evImportGraph restores partition id of num of the variable saved as
// name and its slot name/Adagrad from prefix into "emb" and
// "emb/Adagrad", with filter_freq evFilter, as train's graph declares it.
func evImportGraph(prefix, name string, id, num int) *tfpb.GraphDef {
	imp := func(node, self, value, name string, deps []string, kv ...any) *tfpb.NodeDef {
		return NodeDef(node, "KvResourceImportV2", append(In("prefix", self, "emb", value, name, "empty_key"), deps...),
			Attrs(append([]any{"dtype", wire.DTFloat, "shape", []int64{kvDim}, "Tkeys", wire.DTInt64, "counter_type", wire.DTInt64,
				"slot_num", 1, "partition_id", id, "partition_num", num, "filter_freq", evFilter}, kv...)...))
	}
	return GraphDef(kvHandle("emb"), kvHandle("emb/Adagrad"), ConstStrList("prefix", nil, prefix),
		ConstF32("default", []int64{1, kvDim}, 0, 0), ConstI64("empty_key", nil, -1),
		ConstF32("acc_init", []int64{1, kvDim}, 0.1, 0.1),
		ConstStrList("name_emb", nil, name), ConstStrList("name_slot", nil, name+"/Adagrad"),
		imp("import_emb", "emb", "default", "name_emb", nil),
		imp("import_slot", "emb/Adagrad", "acc_init", "name_slot", []string{"^import_emb"}, "slot_index", 1))
}

// TestKvCheckpointTensorFlowLayout checks starwire's embedding-variable
// checkpoints against the one TensorFlow read: starwire's reader lists
// testdata/ev_checkpoint as TensorFlow did, and restoring it into two ps
// (each its partition, from both pieces, as DeepRec restores) and saving
// again gives the same tensors, names, dtypes and shapes, and per saved
// part the same rows.
func TestKvCheckpointTensorFlowLayout(t *testing.T) {
	want, prefix := tfLayout(t)
	orig, err := checkpoint.Open(filepath.Join(evTestdata, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	diffLayouts(t, "starwire's reader of the checkpoint TensorFlow read", layoutOf(orig), want)
	step, err := orig.Read("global_step")
	if err != nil {
		t.Fatal(err)
	}

	dir := evCopy(t, prefix)
	var saved []string
	for k := range evPieces {
		env := envIn(t, dir)
		name := fmt.Sprintf("embedding/part_%d", k)
		if _, err := Run(t, env, evImportGraph(prefix, name, k, evPieces), nil); err != nil {
			t.Fatal(err)
		}
		s := int64(-1) // the global step is saved once, by the first piece
		if k == 0 {
			s = tensor.View[int64](step.Data)[0]
		}
		p := fmt.Sprintf("resaved_temp/part-%05d-of-%05d", k, evPieces)
		if _, err := Run(t, env, kvSaveGraph(p, s, name, name+"/Adagrad"), nil); err != nil {
			t.Fatal(err)
		}
		saved = append(saved, filepath.Join(dir, p))
	}
	if err := checkpoint.Merge(saved, filepath.Join(dir, "resaved"), true); err != nil {
		t.Fatal(err)
	}
	again, err := checkpoint.Open(filepath.Join(dir, "resaved"))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	diffLayouts(t, "starwire's writer, saving the checkpoint TensorFlow read again", layoutOf(again), want)
	for k := range evPieces {
		for _, v := range []string{fmt.Sprintf("embedding/part_%d", k), fmt.Sprintf("embedding/part_%d/Adagrad", k)} {
			a, b := evRowsByPart(t, orig, v), evRowsByPart(t, again, v)
			if !maps2Equal(a, b) {
				t.Errorf("%s: saved again, its rows by part differ: %d rows, were %d", v, len(b), len(a))
			}
		}
	}
}

// An evRow is what a checkpoint holds of one id of a variable: its part,
// whether it was filtered, its value, count and version.
type evRow struct {
	part            int
	filtered        bool
	v0, v1          float32
	freq, version   int64
	partitionOffset int32 // the offset of the row's part
}

// evRowsByPart reads the rows of the variable saved as name in r, by id.
func evRowsByPart(t *testing.T, r *checkpoint.Reader, name string) map[int64]evRow {
	t.Helper()
	read := func(suffix string) []byte {
		x, err := r.Read(name + suffix)
		if err != nil {
			t.Fatal(err)
		}
		return x.Data
	}
	rows := map[int64]evRow{}
	add := func(filtered bool, keys, freqs, versions []int64, offsets []int32, values []float32) {
		n := len(keys)
		if len(freqs) != n || len(versions) != n || len(offsets) == 0 || int(offsets[len(offsets)-1]) != n ||
			values != nil && len(values) != n*kvDim {
			t.Fatalf("%s (filtered %v): %d keys, %d freqs, %d versions, %d values, offsets to %v",
				name, filtered, n, len(freqs), len(versions), len(values), offsets[len(offsets)-1:])
		}
		for p := range len(offsets) - 1 {
			for i := offsets[p]; i < offsets[p+1]; i++ {
				row := evRow{part: p, filtered: filtered, freq: freqs[i], version: versions[i], partitionOffset: offsets[p]}
				if values != nil {
					row.v0, row.v1 = values[i*kvDim], values[i*kvDim+1]
				}
				if _, dup := rows[keys[i]]; dup {
					t.Fatalf("%s: id %d saved twice", name, keys[i])
				}
				rows[keys[i]] = row
			}
		}
	}
	add(false, tensor.View[int64](read("-keys")), tensor.View[int64](read("-freqs")), tensor.View[int64](read("-versions")),
		tensor.View[int32](read("-partition_offset")), tensor.View[float32](read("-values")))
	add(true, tensor.View[int64](read("-keys_filtered")), tensor.View[int64](read("-freqs_filtered")),
		tensor.View[int64](read("-versions_filtered")), tensor.View[int32](read("-partition_filter_offset")), nil)
	if len(rows) == 0 {
		t.Fatalf("%s: no rows", name)
	}
	return rows
}

// TestKvImportDeepRecUnrecorded restores a checkpoint as DeepRec saves a
// variable that records neither counts nor versions: -freqs, -versions
// and -versions_filtered empty. The rows restore with count and version 0.
func TestKvImportDeepRecUnrecorded(t *testing.T) {
	_, prefix := tfLayout(t)
	dir := evCopy(t, prefix)
	r, err := checkpoint.Open(filepath.Join(dir, prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := checkpoint.NewWriter(filepath.Join(dir, "deeprec"), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	empty := I64([]int64{0})
	for _, e := range r.Entries() {
		x, err := r.Read(e.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"-freqs", "-versions", "-versions_filtered"} {
			if strings.HasSuffix(e.Name, s) {
				x = empty
			}
		}
		if err := w.Add(e.Name, &x); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	want := evRowsByPart(t, r, "embedding/part_0")
	env := envIn(t, dir)
	if _, err := Run(t, env, evImportGraph("deeprec", "embedding/part_0", 0, evPieces), nil); err != nil {
		t.Fatal(err)
	}
	got := kvRows(t, env)
	admitted := 0
	for id, w := range want {
		if w.filtered {
			continue
		}
		admitted++
		g, ok := got[id]
		if !ok || g[0] != float64(w.v0) || g[1] != float64(w.v1) || g[2*kvDim] != 0 || g[2*kvDim+1] != 0 {
			t.Fatalf("id %d restored as %v (present %v), want value [%v %v], version and count 0", id, g, ok, w.v0, w.v1)
		}
	}
	if len(got) != admitted {
		t.Fatalf("%d rows restored, want the %d admitted ones", len(got), admitted)
	}
}
