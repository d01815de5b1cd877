package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// TestCheckpointFollowStateFile: a follower with --state_file stopped
// after version 3 and started again once versions 4 and 5 are out
// prints them alone, and the two runs print what one follower that never
// stopped prints; one whose state says version 2 (stopped between two
// versions) goes on at 3; one behind what the writer keeps is told to
// remove its state.
func TestCheckpointFollowStateFile(t *testing.T) {
	dir, state := t.TempDir(), filepath.Join(t.TempDir(), "follow.state")
	tab, err := embedding.New(embedding.Options{Dim: 2, Slots: []float32{0.1}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := changes.NewWriterWithOptions(dir, changes.WriterOptions{Keep: 3})
	if err != nil {
		t.Fatal(err)
	}
	w.Track("emb", tab)
	export := func(ids []int64, step int64) {
		t.Helper()
		tab.Gather(ids, make([]float32, 2*len(ids)))
		if _, err := tab.ApplyAdagrad(ids, make([]float32, 2*len(ids)), 0.1, step); err != nil {
			t.Fatal(err)
		}
		if step == 4 {
			tab.Evict(4, 2, 0) // 1 and 2
		}
		if m, err := w.Export(step + 1); err != nil || m == nil {
			t.Fatalf("export: %v, %v", m, err)
		}
	}
	follow := func(args ...string) string {
		t.Helper()
		code, out, errs := runCapture(append([]string{"checkpoint", "follow", dir, "--once"}, args...)...)
		if code != 0 {
			t.Fatalf("follow %v: code %d, stderr %s", args, code, errs)
		}
		return out
	}
	// never is a follower that never stops, printing what it applies.
	never, neverOut := changes.NewFollower(dir), &strings.Builder{}
	poll := func() {
		t.Helper()
		if err := never.PollEach(func(a changes.Applied) error { printApplied(neverOut, a); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	export([]int64{1, 2, 3}, 1)
	export([]int64{3, 4}, 2)
	export([]int64{4}, 3)
	poll()
	first := follow("--state_file", state)
	export([]int64{5, 6}, 4) // version 4: a base, as every third is
	export([]int64{6}, 5)
	poll()
	second := follow("--state_file", state)
	whole := follow()
	t.Logf("first run:\n%ssecond run:\n%sone run from the newest base:\n%s", first, second, whole)
	lines := func(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
	f, s := lines(first), lines(second)
	if len(f) != 4 || len(s) != 3 || !slices.Equal(append(f[:3:3], s[:2]...), lines(neverOut.String())) {
		t.Fatalf("the runs printed\n%s\n%s\nwant versions 1-3, then 4-5 alone, as a follower that never stopped:\n%s", first, second, neverOut)
	}
	if wl := lines(whole); s[2] != wl[len(wl)-1] || s[2] != fmt.Sprintf("at version 5: emb %d rows", tab.Len()) {
		t.Fatalf("after the restart %q, one run %q, the ps has %d rows", s[2], wl[len(wl)-1], tab.Len())
	}
	b, _ := os.ReadFile(state)
	if !strings.Contains(string(b), `"version":5`) {
		t.Fatalf("state file %s after version 5", b)
	}

	// Stopped after version 2: the next run makes its tables again from
	// the base, 1, and prints 3 on.
	abs, _ := filepath.Abs(dir)
	os.WriteFile(state, fmt.Appendf(nil, `{"stream":%q,"version":2}`, abs), 0o644)
	if _, err := os.Stat(filepath.Join(dir, "v000000000001.manifest")); err != nil {
		t.Fatalf("version 1 was removed, keeping 3 of 5: %v", err)
	}
	if out := lines(follow("--state_file", state)); len(out) != 4 || !strings.HasPrefix(out[0], "version 3 ") || out[3] != s[2] {
		t.Fatalf("after version 2 the follower printed %q", out)
	}

	// Versions 6 and 7 make 1 to 3 go; a follower at 2 fell behind.
	export([]int64{7}, 6)
	export([]int64{8}, 7)
	os.WriteFile(state, fmt.Appendf(nil, `{"stream":%q,"version":2}`, abs), 0o644)
	code, out, errs := runCapture("checkpoint", "follow", dir, "--once", "--state_file", state)
	if code != 1 || out != "" || !strings.Contains(errs, "holds versions 4 to 7") || !strings.Contains(errs, "remove --state_file "+state) {
		t.Fatalf("a follower behind: code %d, stdout %q, stderr %q", code, out, errs)
	}
	os.WriteFile(state, fmt.Appendf(nil, `{"stream":"/elsewhere","version":2}`), 0o644)
	if code, _, errs := runCapture("checkpoint", "follow", dir, "--once", "--state_file", state); code != 1 || !strings.Contains(errs, "is of the stream in /elsewhere") {
		t.Fatalf("another stream's state: code %d, stderr %q", code, errs)
	}
}

// TestCheckpointFollowWaitsForDir: a follower started before its ps
// waits for the stream's directory, saying so every 5 s, and follows it
// once made; --wait bounds the wait; --once alone does not wait, and
// names the directory it lacks.
func TestCheckpointFollowWaitsForDir(t *testing.T) {
	made := t.TempDir()
	writeChangeStream(t, made)
	dir := filepath.Join(t.TempDir(), "stream")
	synctest.Test(t, func(t *testing.T) {
		var logged strings.Builder
		log := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{ReplaceAttr: dropTime}))
		var out strings.Builder
		done := make(chan error, 1)
		go func() { done <- follow(t.Context(), []string{dir, "--once", "--wait", "1m"}, &out, log) }()
		time.Sleep(12 * time.Second)
		synctest.Wait()
		if n := strings.Count(logged.String(), "waiting for "+dir+", the ps's --stream_dir, to be made"); n != 2 || out.Len() != 0 {
			t.Fatalf("after 12 s without %s: %d reports, stdout %q, logged\n%s", dir, n, out.String(), logged.String())
		}
		if err := os.Rename(made, dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case err := <-done:
			if err != nil || !strings.HasSuffix(out.String(), "at version 3: emb 2 rows\n") {
				t.Fatalf("once %s was made: %v, stdout %q", dir, err, out.String())
			}
		default:
			t.Fatalf("the follower still waits a second after %s was made", dir)
		}
	})
	missing := filepath.Join(t.TempDir(), "none")
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		err := follow(t.Context(), []string{missing, "--wait", "3s"}, io.Discard, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), missing+" was not made in --wait 3s") || time.Since(start) != 3*time.Second {
			t.Fatalf("--wait 3s on %s: %v after %v", missing, err, time.Since(start))
		}
	})
	code, out, errs := runCapture("checkpoint", "follow", missing, "--once")
	if code != 1 || out != "" || !strings.Contains(errs, "starwire: checkpoint follow: the stream's directory "+missing+" does not exist") {
		t.Fatalf("--once on %s: code %d, stdout %q, stderr %q", missing, code, out, errs)
	}
}

// dropTime removes slog's time, which a fake clock makes meaningless.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}
