package changes

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// seedFromStream adds the files of a real stream's versions to f: its
// manifests or its parts.
func seedFromStream(f *testing.F, manifests bool) {
	dir := f.TempDir()
	vs := writeSeedStream(f, dir)
	for _, v := range vs {
		m, err := readManifest(dir, v)
		if err != nil {
			f.Fatal(err)
		}
		if manifests {
			b, _ := os.ReadFile(filepath.Join(dir, manifestName(v)))
			f.Add(b, v)
			continue
		}
		for _, p := range m.Parts {
			b, _ := os.ReadFile(filepath.Join(dir, p.File))
			f.Add(b, v)
		}
	}
}

// writeSeedStream writes a base, an update and an update with evictions.
func writeSeedStream(f *testing.F, dir string) []int64 {
	ps := newTable(f)
	w, err := NewWriter(dir)
	if err != nil {
		f.Fatal(err)
	}
	w.Track("emb", ps)
	update(f, ps, []int64{1, 2, 3}, 1)
	w.Export(2)
	update(f, ps, []int64{3, 4}, 2)
	w.Export(3)
	update(f, ps, []int64{5}, 3)
	ps.Evict(3, 1, 0)
	w.Export(4)
	vs, err := versions(dir)
	if err != nil || len(vs) != 3 {
		f.Fatalf("seed stream: versions %v, %v", vs, err)
	}
	return vs
}

// FuzzDecodePart: any bytes decode to a part that encodes back to them,
// or to an error wrapping ErrCorrupt; none panics or allocates what its
// length cannot hold.
func FuzzDecodePart(f *testing.F) {
	seedFromStream(f, false)
	f.Fuzz(func(t *testing.T, b []byte, _ int64) {
		p, err := DecodePart(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if again := AppendPart(nil, p); !bytes.Equal(again, b) {
			t.Fatalf("decoded part encodes to %d other bytes", len(again))
		}
	})
}

// FuzzDecodeManifest: a manifest decodes to one of its version whose
// parts are of distinct tables in that version's files, or to an error
// wrapping ErrCorrupt.
func FuzzDecodeManifest(f *testing.F) {
	seedFromStream(f, true)
	f.Fuzz(func(t *testing.T, b []byte, v int64) {
		m, err := DecodeManifest(b, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v does not wrap ErrCorrupt", err)
			}
			return
		}
		if m.Version != v {
			t.Fatalf("version %d decoded as %d", v, m.Version)
		}
		seen := map[string]bool{}
		for k, p := range m.Parts {
			if !partIs(p.File, v, k) || filepath.Base(p.File) != p.File || seen[p.Table] {
				t.Fatalf("part %d: %+v", k, p)
			}
			seen[p.Table] = true
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}
