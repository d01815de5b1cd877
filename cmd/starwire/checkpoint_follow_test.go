package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/embedding"
	"github.com/starwire/starwire/handlers/embedding/changes"
)

// writeChangeStream writes three versions of a table "emb" into dir: a
// base of 3 rows, 2 rows changed (one new), and 1 row changed with 2
// evicted.
func writeChangeStream(t *testing.T, dir string) {
	t.Helper()
	tab, err := embedding.New(embedding.Options{Dim: 2, Slots: []float32{0.1}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := changes.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", tab)
	step := func(ids []int64, s int64) {
		tab.Gather(ids, make([]float32, 2*len(ids)))
		if _, err := tab.ApplyAdagrad(ids, make([]float32, 2*len(ids)), 0.1, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		ids  []int64
		step int64
	}{{[]int64{1, 2, 3}, 1}, {[]int64{3, 4}, 2}, {[]int64{4}, 3}} {
		step(s.ids, s.step)
		if s.step == 3 {
			tab.Evict(3, 1, 0) // 1 and 2
		}
		if m, err := w.Export(s.step + 1); err != nil || m == nil {
			t.Fatalf("export: %v, %v", m, err)
		}
	}
}

func TestCheckpointFollow(t *testing.T) {
	dir := t.TempDir()
	writeChangeStream(t, dir)
	code, out, errs := runCapture("checkpoint", "follow", dir, "--once")
	want := "version 1 (base, to step 2): emb 3 rows in full\n" +
		"version 2 (steps 2-3): emb 2 rows, 0 evicted (0 removed), 4 in all\n" +
		"version 3 (steps 3-4): emb 1 rows, 2 evicted (2 removed), 2 in all\n" +
		"at version 3: emb 2 rows\n"
	if code != 0 || out != want {
		t.Fatalf("follow: code %d, stdout\n%s\nstderr %s\nwant\n%s", code, out, errs, want)
	}
}

func TestCheckpointFollowCorrupt(t *testing.T) {
	dir := t.TempDir()
	writeChangeStream(t, dir)
	parts, _ := filepath.Glob(filepath.Join(dir, "v000000000002-*.part"))
	if len(parts) != 1 {
		t.Fatalf("parts of version 2: %v", parts)
	}
	b, _ := os.ReadFile(parts[0])
	b[len(b)-10] ^= 1
	os.WriteFile(parts[0], b, 0o644)
	code, out, errs := runCapture("checkpoint", "follow", "--once", dir)
	if code != 1 || out != "version 1 (base, to step 2): emb 3 rows in full\n" ||
		!strings.Contains(errs, "checksum") || !strings.Contains(errs, "applied up to version 1") {
		t.Fatalf("follow over a corrupt part: code %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runCapture("checkpoint", "follow"); code != 2 || !strings.Contains(errs, "give the stream's DIR") {
		t.Fatalf("follow without DIR: code %d, stderr %q", code, errs)
	}
}
