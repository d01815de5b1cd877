package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/starwire/starwire/wire"
)

func TestMerge(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "ckpt-3_temp")
	tensors := map[string]*wire.Tensor{}
	var parts []string
	const shards = 3
	for i := range shards {
		prefix := filepath.Join(tmp, fmt.Sprintf("part-%05d-of-%05d", i, shards))
		var names []string
		for j := range 4 {
			name := fmt.Sprintf("layer%d/w%d", j, i)
			tensors[name] = randTensor(allDTypes[(i*4+j)%len(allDTypes)], []int64{int64(j), 2}, uint64(i*4+j))
			names = append(names, name)
		}
		save(t, prefix, names, tensors)
		parts = append(parts, prefix)
	}
	final := filepath.Join(dir, "ckpt-3")
	if err := Merge(parts, final, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory left: %v", err)
	}
	for i := range shards {
		if _, err := os.Stat(DataFile(final, i, shards)); err != nil {
			t.Error(err)
		}
	}
	r := open(t, final)
	if r.numShards != shards {
		t.Errorf("header says %d shards, want %d", r.numShards, shards)
	}
	for name, want := range tensors {
		got, err := r.Read(name)
		if err != nil {
			t.Fatal(err)
		}
		equalTensor(t, name, got, want)
	}
}

func TestMergeRejectsDuplicates(t *testing.T) {
	dir := t.TempDir()
	v := randTensor(wire.DTFloat, []int64{2}, 1)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	save(t, a, []string{"v"}, map[string]*wire.Tensor{"v": v})
	save(t, b, []string{"v"}, map[string]*wire.Tensor{"v": v})
	if err := Merge([]string{a, b}, filepath.Join(dir, "m"), false); !errors.Is(err, ErrMismatch) {
		t.Errorf("merge of a tensor saved twice: %v, want ErrMismatch", err)
	}
	if err := Merge([]string{filepath.Join(dir, "none")}, filepath.Join(dir, "m"), false); !errors.Is(err, ErrNotFound) {
		t.Errorf("merge of a missing source: %v, want ErrNotFound", err)
	}
}

// TestMergeOneKeepsBytes: merging a single one-file checkpoint rewrites its
// index as TensorFlow would: identical but for nothing.
func TestMergeOneKeepsBytes(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "tmp", "part-00000-of-00001")
	for _, f := range []string{".index", ".data-00000-of-00001"} {
		b, err := os.ReadFile(tfPrefix + f)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(src), 0o755)
		if err := os.WriteFile(src+f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(dir, "variables")
	if err := Merge([]string{src}, dst, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{".index", ".data-00000-of-00001"} {
		want, _ := os.ReadFile(tfPrefix + f)
		got, err := os.ReadFile(dst + f)
		if err != nil || string(got) != string(want) {
			t.Errorf("%s after merge: %v, differs from TensorFlow's: %v", f, err, string(got) != string(want))
		}
	}
}
