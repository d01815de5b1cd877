package checkpoint_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/wire"
)

// writeCkpt writes a checkpoint of one tensor under prefix.
func writeCkpt(t *testing.T, prefix string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := checkpoint.NewWriter(prefix, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add("x", &wire.Tensor{DType: wire.DTInt64, Data: make([]byte, 8)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
}

// TestIncrements records increments of two full checkpoints: each full
// lists its own, oldest first; the directory's state names the full ones
// alone; dropping a full checkpoint deletes its increments.
func TestIncrements(t *testing.T) {
	dir := t.TempDir()
	full := func(step string) string {
		p := filepath.Join(dir, "model.ckpt-"+step)
		writeCkpt(t, p)
		if err := checkpoint.Keep(dir, p, 1); err != nil {
			t.Fatal(err)
		}
		return p
	}
	incr := func(base, step string) string {
		p := filepath.Join(checkpoint.IncrementsDir(dir, base), checkpoint.IncrementBasename+"-"+step)
		writeCkpt(t, p)
		if err := checkpoint.AddIncrement(dir, base, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := full("10")
	want := []string{incr(a, "20"), incr(a, "30")}
	got, err := checkpoint.Increments(dir, a)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("increments of %s: %v, %v; want %v", a, got, err, want)
	}
	if latest, err := checkpoint.Latest(dir); err != nil || latest != a {
		t.Fatalf("latest %q, %v; want the full checkpoint %s", latest, err, a)
	}
	b := full("40")
	if got, err := checkpoint.Increments(dir, b); err != nil || len(got) != 0 {
		t.Fatalf("a new full checkpoint's increments: %v, %v; want none", got, err)
	}
	if err := checkpoint.PruneIncrements(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(checkpoint.IncrementsDir(dir, a)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the increments of %s, dropped, are still there: %v", a, err)
	}
	c := incr(b, "50")
	if err := os.Remove(checkpoint.IndexFile(c)); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Increments(dir, b); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("an increment whose files are gone: %v, want ErrNotFound", err)
	}
}
