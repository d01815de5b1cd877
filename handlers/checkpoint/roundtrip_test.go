package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/starwire/starwire/wire"
)

func TestRoundTripEveryDType(t *testing.T) {
	shapes := [][]int64{{}, {0}, {3}, {2, 3}, {2, 0, 4}, {1, 2, 1, 3}}
	tensors := map[string]*wire.Tensor{}
	var names []string
	for _, dt := range allDTypes {
		for i, s := range shapes {
			name := fmt.Sprintf("%v/%d", dt, i)
			names = append(names, name)
			tensors[name] = randTensor(dt, s, uint64(len(names)))
		}
	}
	prefix := tempPrefix(t, "model.ckpt-1")
	save(t, prefix, names, tensors)
	r := open(t, prefix)
	if got := len(r.Entries()); got != len(names) {
		t.Fatalf("%d entries, want %d", got, len(names))
	}
	if !slices.IsSortedFunc(r.Entries(), func(a, b Entry) int { return cmpString(a.Name, b.Name) }) {
		t.Error("entries not sorted")
	}
	for _, n := range names {
		e, ok := r.Entry(n)
		if !ok || e.DType != tensors[n].DType || !slices.Equal(e.Shape, tensors[n].Shape) || e.Slices != nil {
			t.Fatalf("entry %q = %+v, %v", n, e, ok)
		}
		got, err := r.Read(n)
		if err != nil {
			t.Fatal(err)
		}
		equalTensor(t, n, got, tensors[n])
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestObjectBasedNames: TensorFlow 2 names are plain names.
func TestObjectBasedNames(t *testing.T) {
	graph := &wire.Tensor{DType: wire.DTString, Shape: []int64{}, Data: wire.AppendStrings(nil, [][]byte{{0x0a, 0x00, 0xff, 0x12}})}
	kernel := randTensor(wire.DTFloat, []int64{4, 2}, 7)
	tensors := map[string]*wire.Tensor{
		"_CHECKPOINTABLE_OBJECT_GRAPH":                  graph,
		"model/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE": kernel,
		"save_counter/.ATTRIBUTES/VARIABLE_VALUE":       randTensor(wire.DTInt64, []int64{}, 8),
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range tensors {
			if !yield(k) {
				return
			}
		}
	})
	prefix := tempPrefix(t, "ckpt-1")
	save(t, prefix, names, tensors)
	r := open(t, prefix)
	for _, n := range names {
		got, err := r.Read(n)
		if err != nil {
			t.Fatal(err)
		}
		equalTensor(t, n, got, tensors[n])
	}
	if _, err := r.Read("model/dense/kernel"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a name's prefix: %v, want ErrNotFound", err)
	}
}

func TestWriterRejects(t *testing.T) {
	ok := randTensor(wire.DTFloat, []int64{2}, 1)
	cases := []struct {
		name   string
		tensor *wire.Tensor
	}{
		{"", ok}, // the header's key
		{"short", &wire.Tensor{DType: wire.DTFloat, Shape: []int64{3}, Data: make([]byte, 8)}},
		{"resource", &wire.Tensor{DType: wire.DTResource, Shape: []int64{}, Data: []byte{1}}},
		{"badstrings", &wire.Tensor{DType: wire.DTString, Shape: []int64{2}, Data: []byte{5, 'a'}}},
	}
	for _, c := range cases {
		w, err := NewWriter(tempPrefix(t, "x"), 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(c.name, c.tensor); !errors.Is(err, ErrMismatch) {
			t.Errorf("Add(%q): %v, want ErrMismatch", c.name, err)
		}
		if err := w.Finish(); err == nil {
			t.Errorf("Finish after a failed Add(%q) succeeded", c.name)
		}
	}
	prefix := tempPrefix(t, "dup")
	w, _ := NewWriter(prefix, 0, 1)
	if err := w.Add("a", ok); err != nil {
		t.Fatal(err)
	}
	if err := w.Add("a", ok); !errors.Is(err, ErrMismatch) {
		t.Errorf("duplicate Add: %v", err)
	}
	w.Abort()
	if left, _ := os.ReadDir(dirOf(prefix)); len(left) != 0 {
		t.Errorf("Abort left %d files", len(left))
	}
	if _, err := NewWriter(prefix, 2, 2); !errors.Is(err, ErrMismatch) {
		t.Errorf("shard 2 of 2: %v", err)
	}
}

func dirOf(prefix string) string {
	i := len(prefix) - 1
	for i >= 0 && prefix[i] != '/' {
		i--
	}
	return prefix[:i]
}

// TestFinishReplacesAtomically: until Finish, an earlier checkpoint under
// the same prefix reads as before, and nothing but it is visible.
func TestFinishReplacesAtomically(t *testing.T) {
	prefix := tempPrefix(t, "ckpt")
	old := randTensor(wire.DTInt32, []int64{4}, 1)
	save(t, prefix, []string{"v"}, map[string]*wire.Tensor{"v": old})
	w, err := NewWriter(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	next := randTensor(wire.DTInt32, []int64{4}, 2)
	if err := w.Add("v", next); err != nil {
		t.Fatal(err)
	}
	r := open(t, prefix)
	got, err := r.Read("v")
	if err != nil {
		t.Fatal(err)
	}
	equalTensor(t, "before Finish", got, old)
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	got, err = open(t, prefix).Read("v")
	if err != nil {
		t.Fatal(err)
	}
	equalTensor(t, "after Finish", got, next)
	files, _ := os.ReadDir(dirOf(prefix))
	if len(files) != 2 {
		t.Errorf("%d files after Finish, want index and data", len(files))
	}
}

// TestConcurrentReads: one Reader serves many goroutines (run with -race).
func TestConcurrentReads(t *testing.T) {
	tensors := map[string]*wire.Tensor{}
	var names []string
	for i := range 8 {
		n := fmt.Sprintf("v%d", i)
		names = append(names, n)
		tensors[n] = randTensor(allDTypes[i], []int64{16, 4}, uint64(i))
	}
	prefix := tempPrefix(t, "ckpt")
	save(t, prefix, names, tensors)
	r := open(t, prefix)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			var err error
			for i := range 50 {
				n := names[(g+i)%len(names)]
				var got wire.Tensor
				if got, err = r.Read(n); err == nil && len(got.Data) != len(tensors[n].Data) {
					err = fmt.Errorf("%s: %d bytes", n, len(got.Data))
				}
				if err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
