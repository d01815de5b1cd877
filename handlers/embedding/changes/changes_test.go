package changes

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/starwire/starwire/handlers/embedding"
)

func newTable(t testing.TB) *embedding.Table {
	t.Helper()
	tab, err := embedding.New(embedding.Options{Dim: 4, Slots: []float32{0.1}, Init: embedding.Initializer{UniformLimit: 0.1, Seed: 7}})
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// sorted returns s's rows sorted by id, without filtered ids.
func sorted(s *embedding.Snapshot) *embedding.Snapshot {
	d := s.Dim
	order := make([]int, len(s.IDs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(s.IDs[a], s.IDs[b]) })
	out := &embedding.Snapshot{Dim: d, IDs: []int64{}, Freqs: []int64{}, Versions: []int64{}, Values: []float32{}, Slots: make([][]float32, len(s.Slots))}
	for k := range out.Slots {
		out.Slots[k] = []float32{}
	}
	for _, i := range order {
		out.IDs = append(out.IDs, s.IDs[i])
		out.Freqs = append(out.Freqs, s.Freqs[i])
		out.Versions = append(out.Versions, s.Versions[i])
		out.Values = append(out.Values, s.Values[i*d:(i+1)*d]...)
		for k := range s.Slots {
			out.Slots[k] = append(out.Slots[k], s.Slots[k][i*d:(i+1)*d]...)
		}
	}
	return out
}

// wantEqual fails unless the follower's table holds exactly ps's rows:
// ids, values, slots, counts and versions.
func wantEqual(t *testing.T, ps, replayed *embedding.Table) {
	t.Helper()
	if replayed == nil {
		t.Fatal("the follower has no table")
	}
	a, b := sorted(ps.Snapshot()), sorted(replayed.Snapshot())
	if len(a.IDs) == 0 {
		t.Fatal("the ps's table is empty: nothing compared")
	}
	if !reflect.DeepEqual(a, b) {
		for i := range min(len(a.IDs), len(b.IDs)) {
			d := a.Dim
			if a.IDs[i] != b.IDs[i] || a.Freqs[i] != b.Freqs[i] || a.Versions[i] != b.Versions[i] || !slices.Equal(a.Values[i*d:(i+1)*d], b.Values[i*d:(i+1)*d]) {
				t.Errorf("row %d: ps id %d freq %d version %d %v, follower id %d freq %d version %d %v", i,
					a.IDs[i], a.Freqs[i], a.Versions[i], a.Values[i*d:(i+1)*d], b.IDs[i], b.Freqs[i], b.Versions[i], b.Values[i*d:(i+1)*d])
				break
			}
		}
		for k := range a.Slots {
			for j := range a.Slots[k] {
				if j < len(b.Slots[k]) && a.Slots[k][j] != b.Slots[k][j] {
					t.Errorf("slot %d of row %d (id %d): ps %v follower %v", k, j/a.Dim, a.IDs[j/a.Dim], a.Slots[k][j], b.Slots[k][j])
					break
				}
			}
		}
		t.Errorf("dims %d %d slots %d %d ids %v freqs %v versions %v values %v slots %v", a.Dim, b.Dim, len(a.Slots), len(b.Slots),
			reflect.DeepEqual(a.IDs, b.IDs), reflect.DeepEqual(a.Freqs, b.Freqs), reflect.DeepEqual(a.Versions, b.Versions), reflect.DeepEqual(a.Values, b.Values), reflect.DeepEqual(a.Slots, b.Slots))
		t.Fatalf("replayed table differs: ps %d rows, follower %d", len(a.IDs), len(b.IDs))
	}
}

// update gathers and updates ids at step, as a training step does.
func update(t testing.TB, tab *embedding.Table, ids []int64, step int64) {
	out := make([]float32, 4*len(ids))
	if err := tab.Gather(ids, out); err != nil {
		t.Error(err)
	}
	g := make([]float32, len(out))
	for i := range g {
		g[i] = float32(int(ids[i/4])%7-3) * 0.01
	}
	if _, err := tab.ApplyAdagrad(ids, g, 0.5, step); err != nil {
		t.Error(err)
	}
}

// TestRoundTripConcurrent: a follower polling while workers update the
// table, evictions remove rows and the writer exports, replays a table
// equal to the ps's once the workers stop and a last version is out.
func TestRoundTripConcurrent(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", ps)
	const workers, steps, rounds = 3, 40, 6
	var global atomic.Int64
	// inFlight[i] is the step worker i is applying (0: none): an export's
	// upto is the oldest of them, so no update it has not seen is older.
	var inFlight [workers]atomic.Int64
	upto := func() int64 {
		u := global.Load() + 1
		for i := range inFlight {
			if s := inFlight[i].Load(); s != 0 {
				u = min(u, s)
			}
		}
		return u
	}
	f := NewFollower(dir)
	exports, evicted := 0, 0
	// Rounds of steps, each exported and followed while it runs (at least
	// once: the loop exports before it looks whether the round is done).
	for round := range rounds {
		var wg sync.WaitGroup
		for i := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(round)))
				ids := make([]int64, 32)
				for range steps {
					inFlight[i].Store(global.Load() + 1)
					s := global.Add(1)
					inFlight[i].Store(s)
					for j := range ids {
						ids[j] = int64(rng.IntN(2000)) * 0x1e3779b97f4a7c15
					}
					update(t, ps, slices.Compact(slices.Sorted(slices.Values(ids))), s)
					inFlight[i].Store(0)
				}
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for running := true; running; {
			u := upto()
			evicted += ps.Evict(global.Load(), 60, 0)
			m, err := w.Export(u)
			if err != nil {
				t.Fatal(err)
			}
			if m != nil {
				exports++
			}
			if _, err := f.Poll(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
				running = false
			default:
			}
		}
	}
	if _, err := w.Export(upto()); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d exports, %d rows evicted, %d rows", exports, evicted, ps.Len())
	if exports < rounds || evicted == 0 {
		t.Fatalf("%d exports and %d evictions: the stream was not exercised", exports, evicted)
	}
	wantEqual(t, ps, f.Table("emb"))
	if f.Version() != w.Next()-1 {
		t.Fatalf("follower at version %d, writer wrote %d", f.Version(), w.Next()-1)
	}
}

// stream writes three versions of a table into dir: a base, an update,
// and an update with evictions. It returns the table and the writer.
func stream(t *testing.T, dir string) (*embedding.Table, *Writer) {
	t.Helper()
	ps := newTable(t)
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", ps)
	update(t, ps, []int64{1, 2, 3, 4, 5}, 1)
	mustExport(t, w, 2)
	update(t, ps, []int64{4, 5, 6, 7}, 2)
	mustExport(t, w, 3)
	update(t, ps, []int64{7, 8}, 3)
	if n := ps.Evict(3, 1, 0); n != 3 {
		t.Fatalf("evicted %d rows, want 1, 2 and 3", n)
	}
	mustExport(t, w, 4)
	return ps, w
}

func mustExport(t *testing.T, w *Writer, upto int64) *Manifest {
	t.Helper()
	m, err := w.Export(upto)
	if err != nil || m == nil {
		t.Fatalf("export: %v, %v", m, err)
	}
	return m
}

// TestVersions: a base, then what changed, evictions among it.
func TestVersions(t *testing.T) {
	dir := t.TempDir()
	ps, _ := stream(t, dir)
	f := NewFollower(dir)
	got, err := f.Poll()
	if err != nil {
		t.Fatal(err)
	}
	want := []Applied{
		{Version: 1, Base: true, Since: 0, Upto: 2, Tables: []TableApplied{{Name: "emb", Full: true, Rows: 5, Total: 5}}},
		{Version: 2, Since: 2, Upto: 3, Tables: []TableApplied{{Name: "emb", Rows: 4, Total: 7}}},
		{Version: 3, Since: 3, Upto: 4, Tables: []TableApplied{{Name: "emb", Rows: 2, Evicted: 3, Removed: 3, Total: 5}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("applied\n%+v\nwant\n%+v", got, want)
	}
	wantEqual(t, ps, f.Table("emb"))
	if again, err := f.Poll(); err != nil || len(again) != 0 {
		t.Fatalf("a second poll applied %v, %v; want nothing", again, err)
	}
}

// TestWriterRestart: a ps that restarts restores an older checkpoint;
// its new writer goes on at the next version, with a base, so that a
// follower of the old versions and a new one both end equal to the ps,
// and no version is written twice or skipped.
func TestWriterRestart(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", ps)
	update(t, ps, []int64{1, 2, 3}, 1)
	mustExport(t, w, 2)
	checkpoint := ps.Snapshot() // the checkpoint the ps restarts from
	update(t, ps, []int64{3, 4, 5}, 2)
	mustExport(t, w, 3)
	old := NewFollower(dir)
	if _, err := old.Poll(); err != nil || old.Version() != 2 {
		t.Fatalf("follower at %d: %v", old.Version(), err)
	}
	// An export that died after its part: the restarted writer drops it.
	stray := filepath.Join(dir, partName(3, 0, "00112233aabbccdd"))
	if err := os.WriteFile(stray, []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}

	restarted := newTable(t)
	if err := restarted.Restore(checkpoint); err != nil {
		t.Fatal(err)
	}
	w2, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the unfinished export's part is left: %v", err)
	}
	if w2.Next() != 3 {
		t.Fatalf("restarted writer goes on at %d, want 3", w2.Next())
	}
	w2.Track("emb", restarted)
	update(t, restarted, []int64{2, 6}, 2)
	m := mustExport(t, w2, 3)
	if !m.Base || m.Version != 3 {
		t.Fatalf("first version after the restart: %+v, want base 3", m)
	}
	update(t, restarted, []int64{6, 7}, 3)
	mustExport(t, w2, 4)

	// The old writer, still alive, cannot write a version again.
	update(t, ps, []int64{9}, 9)
	if _, err := w.Export(10); !errors.Is(err, ErrExists) {
		t.Fatalf("a second writer's export: %v, want ErrExists", err)
	}
	vs, _ := versions(dir)
	if !slices.Equal(vs, []int64{1, 2, 3, 4}) {
		t.Fatalf("versions %v, want 1..4 once each", vs)
	}
	if _, err := old.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, restarted, old.Table("emb"))
	if old.Table("emb").Len() != 5 { // 4 and 5 were lost with the restart
		t.Fatalf("follower has %d rows, want 5", old.Table("emb").Len())
	}
	fresh := NewFollower(dir)
	got, err := fresh.Poll()
	if err != nil || len(got) != 2 || got[0].Version != 3 {
		t.Fatalf("a new follower applied %+v, %v; want versions 3 and 4", got, err)
	}
	wantEqual(t, restarted, fresh.Table("emb"))
}

// TestRestoreSendsBase: a table restored while the ps runs is sent in
// full, dropping at the follower rows the restore dropped.
func TestRestoreSendsBase(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, _ := NewWriter(dir)
	w.Track("emb", ps)
	update(t, ps, []int64{1, 2}, 1)
	mustExport(t, w, 2)
	ckpt := ps.Snapshot()
	update(t, ps, []int64{3}, 2)
	mustExport(t, w, 3)
	if err := ps.Restore(ckpt); err != nil {
		t.Fatal(err)
	}
	if m := mustExport(t, w, 3); !m.Base {
		t.Fatalf("export after a restore: %+v, want a base", m)
	}
	f := NewFollower(dir)
	f.applied = 0
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, ps, f.Table("emb"))
}

// pollRefused polls dir's follower expecting err and nothing applied.
func pollRefused(t *testing.T, f *Follower, want error) {
	t.Helper()
	before, at := sorted(f.Table("emb").Snapshot()), f.Version()
	got, err := f.Poll()
	if !errors.Is(err, want) {
		t.Fatalf("poll: %v, want %v", err, want)
	}
	t.Logf("refused: %v", err)
	if len(got) != 0 || f.Version() != at || !reflect.DeepEqual(before, sorted(f.Table("emb").Snapshot())) {
		t.Fatalf("a refused version changed the follower: applied %v, at %d (was %d)", got, f.Version(), at)
	}
}

// TestCorruptPart: a part whose bytes disagree with the manifest's
// checksum is refused, nothing of its version applied, and applied once
// it is whole again.
func TestCorruptPart(t *testing.T) {
	dir := t.TempDir()
	ps, _ := stream(t, dir)
	f := NewFollower(dir)
	path := partPath(t, dir, 2)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	bad[len(bad)/2] ^= 0x10
	os.WriteFile(path, bad, 0o644)
	applied, err := f.Poll()
	if !errors.Is(err, ErrCorrupt) || len(applied) != 1 || f.Version() != 1 {
		t.Fatalf("poll over a corrupt version 2: applied %d, at %d, %v; want version 1 alone and ErrCorrupt", len(applied), f.Version(), err)
	}
	pollRefused(t, f, ErrCorrupt)
	os.WriteFile(path, good, 0o644)
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, ps, f.Table("emb"))
}

// TestMissingPart: a manifest naming a part the directory lacks, or a
// part of another size, is refused with nothing applied.
func TestMissingPart(t *testing.T) {
	dir := t.TempDir()
	stream(t, dir)
	f := NewFollower(dir)
	path := partPath(t, dir, 3)
	good, _ := os.ReadFile(path)
	os.Remove(path)
	if _, err := f.Poll(); !errors.Is(err, ErrMissingPart) || f.Version() != 2 {
		t.Fatalf("poll: at %d, %v; want 2 and ErrMissingPart", f.Version(), err)
	}
	pollRefused(t, f, ErrMissingPart)
	os.WriteFile(path, good[:len(good)-1], 0o644)
	pollRefused(t, f, ErrMissingPart)
}

// TestGap: a version missing between two others stops the follower.
func TestGap(t *testing.T) {
	dir := t.TempDir()
	ps, w := stream(t, dir)
	f := NewFollower(dir)
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	update(t, ps, []int64{1}, 5)
	mustExport(t, w, 5)
	update(t, ps, []int64{2}, 6)
	mustExport(t, w, 6)
	os.Remove(filepath.Join(dir, manifestName(4)))
	pollRefused(t, f, ErrGap)
	if _, err := NewFollower(dir).Poll(); !errors.Is(err, ErrGap) { // a new one starts at the base, 1
		t.Fatalf("a new follower: %v, want ErrGap", err)
	}
}

// partPath returns the path of version v's first part.
func partPath(t *testing.T, dir string, v int64) string {
	t.Helper()
	m, err := readManifest(dir, v)
	if err != nil || len(m.Parts) == 0 {
		t.Fatalf("version %d: %v", v, err)
	}
	return filepath.Join(dir, m.Parts[0].File)
}

// TestTrackAgain: tracking a table again is nothing; another table under
// the name takes its place, sent in full.
func TestTrackAgain(t *testing.T) {
	dir := t.TempDir()
	ps := newTable(t)
	w, _ := NewWriter(dir)
	w.Track("emb", ps)
	update(t, ps, []int64{1, 2}, 1)
	mustExport(t, w, 2)
	w.Track("emb", ps)
	update(t, ps, []int64{2}, 2)
	if m := mustExport(t, w, 3); m.Base || m.Parts[0].Rows != 1 {
		t.Fatalf("after tracking the table again: %+v, want 1 row, not a base", m)
	}
	again := newTable(t)
	update(t, again, []int64{7}, 3)
	w.Track("emb", again)
	if m := mustExport(t, w, 4); !m.Base || m.Parts[0].Rows != 1 {
		t.Fatalf("after tracking a new table: %+v, want a base of 1 row", m)
	}
	f := NewFollower(dir)
	if _, err := f.Poll(); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, again, f.Table("emb"))
}
