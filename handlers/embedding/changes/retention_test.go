package changes

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/starwire/starwire/handlers/embedding"
)

// keptStream writes n versions of a table, one row updated each, with a
// writer keeping keep.
func keptStream(t *testing.T, dir string, keep, n int) (*embedding.Table, *Writer) {
	t.Helper()
	ps := newTable(t)
	w, err := NewWriterWithOptions(dir, WriterOptions{Keep: keep})
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", ps)
	for s := range int64(n) {
		update(t, ps, []int64{s % 5, 10 + s}, s+1)
		mustExport(t, w, s+2)
	}
	return ps, w
}

// files returns the versions of dir's manifests and of its parts.
func files(t *testing.T, dir string) (manifests, parts []int64) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if v, _, ok := partOf(e.Name()); ok {
			parts = append(parts, v)
		}
	}
	manifests, _ = versions(dir)
	return manifests, slices.Compact(parts)
}

// TestKeep: a writer keeping 3 versions makes every third a base and
// keeps from the newest base no newer than the third newest, so that a
// new follower starts and ends equal to the ps, and removes the older
// versions' manifests and parts.
func TestKeep(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, err := NewWriterWithOptions(dir, WriterOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", ps)
	var bases []int64
	for s := range int64(10) {
		update(t, ps, []int64{s % 5, 10 + s}, s+1)
		m := mustExport(t, w, s+2)
		if m.Base {
			bases = append(bases, m.Version)
		}
		manifests, parts := files(t, dir)
		from := keptFrom(m.Version, 3, bases)
		want := []int64{}
		for v := max(from, 1); v <= m.Version; v++ {
			want = append(want, v)
		}
		if !slices.Equal(manifests, want) || !slices.Equal(parts, want) {
			t.Fatalf("after version %d: manifests %v, parts %v; want %v", m.Version, manifests, parts, want)
		}
		if len(want) < min(3, int(m.Version)) || len(want) > 5 || !slices.Contains(bases, want[0]) {
			t.Fatalf("after version %d kept %v (bases %v): want 3 to 5 versions from a base", m.Version, want, bases)
		}
	}
	if !slices.Equal(bases, []int64{1, 4, 7, 10}) {
		t.Fatalf("bases %v, want every third version", bases)
	}
	f := NewFollower(dir)
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, ps, f.Table("emb"))
	if _, err := NewWriterWithOptions(dir, WriterOptions{Keep: -1}); err == nil {
		t.Fatal("a writer keeping -1 versions was made")
	}
}

// TestKeepReopened: a writer opened again on a directory knows its bases
// and goes on keeping from one.
func TestKeepReopened(t *testing.T) {
	dir := t.TempDir()
	keptStream(t, dir, 3, 5) // bases 1 and 4
	w, err := NewWriterWithOptions(dir, WriterOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.bases, []int64{1, 4}) {
		t.Fatalf("reopened writer's bases %v, want [1 4]", w.bases)
	}
}

// TestFollowerBehind: a follower whose next version was removed is told
// so, naming the versions kept and to start again from a base, and a
// new follower starts.
func TestFollowerBehind(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, _ := NewWriterWithOptions(dir, WriterOptions{Keep: 2})
	w.Track("emb", ps)
	f := NewFollower(dir)
	for s := range int64(8) {
		update(t, ps, []int64{s}, s+1)
		mustExport(t, w, s+2)
		if s == 1 {
			if _, err := f.Poll(); err != nil || f.Version() != 2 {
				t.Fatalf("follower at %d: %v", f.Version(), err)
			}
		}
	}
	oldest, _ := files(t, dir)
	_, err := f.Poll()
	if !errors.Is(err, ErrBehind) || f.Version() != 2 {
		t.Fatalf("a follower at 2 of versions %v: at %d, %v; want ErrBehind", oldest, f.Version(), err)
	}
	for _, want := range []string{"needs version 3", "holds versions 7 to 8", "start it again from the newest base"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	fresh := NewFollower(dir)
	if _, err := fresh.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, ps, fresh.Table("emb"))
}

// TestFollowerAfter: a follower restarted after version p reports the
// versions after p alone, once each, and ends with the tables of one
// that never stopped, whether p+1 is a base, p itself is one, or p lies
// between; one at a version the stream never reached, or behind what it
// keeps, is refused.
func TestFollowerAfter(t *testing.T) {
	dir := t.TempDir()
	ps, _ := keptStream(t, dir, 3, 9) // bases 1, 4, 7; versions 7 to 9 kept
	var all []int64
	whole := NewFollower(dir)
	if err := whole.PollEach(func(a Applied) error { all = append(all, a.Version); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(all, []int64{7, 8, 9}) {
		t.Fatalf("a new follower applied %v, want 7 to 9 (from the newest base)", all)
	}
	for _, p := range []int64{6, 7, 8, 9} {
		f := NewFollowerAfter(dir, p)
		var got []int64
		if err := f.PollEach(func(a Applied) error { got = append(got, a.Version); return nil }); err != nil {
			t.Fatalf("after %d: %v", p, err)
		}
		var want []int64
		for v := p + 1; v <= 9; v++ {
			want = append(want, v)
		}
		if !slices.Equal(got, want) || f.Version() != 9 {
			t.Fatalf("after %d: reported %v, at %d; want %v", p, got, f.Version(), want)
		}
		wantEqual(t, ps, f.Table("emb"))
	}
	for _, tc := range []struct {
		p    int64
		want error
	}{{5, ErrBehind}, {10, ErrGap}} {
		f := NewFollowerAfter(dir, tc.p)
		got, err := f.Poll()
		if !errors.Is(err, tc.want) || len(got) != 0 || f.Version() != 0 || len(f.Tables()) != 0 {
			t.Fatalf("after %d: applied %v, at %d, %v; want %v and nothing", tc.p, got, f.Version(), err, tc.want)
		}
		t.Logf("after %d: %v", tc.p, err)
	}
	// A version the rebuild needs, gone: refused, and tried again whole.
	m, _ := readManifest(dir, 8)
	part := filepath.Join(dir, m.Parts[0].File)
	b, _ := os.ReadFile(part)
	os.Remove(part)
	f := NewFollowerAfter(dir, 8)
	if _, err := f.Poll(); !errors.Is(err, ErrMissingPart) || f.Version() != 0 {
		t.Fatalf("rebuild over a missing part: at %d, %v", f.Version(), err)
	}
	os.WriteFile(part, b, 0o644)
	got, err := f.Poll()
	if err != nil || len(got) != 1 || got[0].Version != 9 {
		t.Fatalf("rebuild again: %+v, %v; want 9 alone", got, err)
	}
	wantEqual(t, ps, f.Table("emb"))
}

// TestOneVersionPerRound: tables of two tasks sharing a writer export in
// the same round at the same upto: the first export writes both tables'
// changes and the second nothing, except for a table new to the stream.
func TestOneVersionPerRound(t *testing.T) {
	dir := t.TempDir()
	ps0, ps1 := newTable(t), newTable(t)
	w, _ := NewWriter(dir)
	round := func(step int64) (vs []int64) {
		update(t, ps0, []int64{step, 100 + step}, step)
		update(t, ps1, []int64{step}, step)
		for _, tc := range []struct {
			name string
			t    *embedding.Table
		}{{"emb/part_0", ps0}, {"emb/part_1", ps1}} {
			w.Track(tc.name, tc.t)
			m, err := w.Export(step + 1)
			if err != nil {
				t.Fatal(err)
			}
			if m != nil {
				vs = append(vs, m.Version)
			}
		}
		return vs
	}
	if vs := round(1); !slices.Equal(vs, []int64{1, 2}) { // part_1 joins in the second
		t.Fatalf("first round wrote %v, want 1 and 2", vs)
	}
	for s := int64(2); s <= 4; s++ {
		if vs := round(s); len(vs) != 1 {
			t.Fatalf("round %d wrote versions %v, want one", s, vs)
		}
		m, _ := readManifest(dir, w.Next()-1)
		var tables []string
		for _, p := range m.Parts {
			tables = append(tables, p.Table)
		}
		if !reflect.DeepEqual(tables, []string{"emb/part_0", "emb/part_1"}) {
			t.Fatalf("round %d's version holds %v, want both tables", s, tables)
		}
	}
	// An update after the first export of a round, at the round's step,
	// goes in the next version.
	update(t, ps1, []int64{77}, 5)
	if m, err := w.Export(5); m != nil || err != nil {
		t.Fatalf("a second export at upto 5: %v, %v; want nothing", m, err)
	}
	if vs := round(5); len(vs) != 1 {
		t.Fatalf("round 5 wrote %v, want one version", vs)
	}
	f := NewFollower(dir)
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, ps0, f.Table("emb/part_0"))
	wantEqual(t, ps1, f.Table("emb/part_1"))
}
