package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
	"github.com/starwire/starwire/handlers/tensor"
)

// TestServeStreamAcrossProcesses runs a ps as serve --stream_dir, a
// worker, train over them and checkpoint follow --state_file as separate
// processes: the follower, killed after its second version while train
// runs and started again once it ended, prints each version once (but
// for the one it was recording when killed), and the tables it saves are
// the ps's own, as the ps's final checkpoint holds them: ids, values,
// lookup counts and versions.
func TestServeStreamAcrossProcesses(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	reg, stream, ckpt := t.TempDir(), filepath.Join(t.TempDir(), "stream"), filepath.Join(t.TempDir(), "ckpt")
	for _, task := range []string{"ps", "worker"} {
		args := []string{"serve", "--job", task, "--task", "0", "--ps", "1", "--workers", "1", "--registry_dir", reg, "--report", "0"}
		if task == "ps" {
			args = append(args, "--stream_dir", stream, "--checkpoint_dir", ckpt)
		}
		startBinary(t, nil, args...) // each waits for the other in the registry
	}
	state, saved := filepath.Join(t.TempDir(), "follow.state"), filepath.Join(t.TempDir(), "followed", "tables")
	first := startBinary(t, nil, "checkpoint", "follow", stream, "--interval", "20ms", "--state_file", state)
	train := startBinary(t, nil, "train", "--registry_dir", reg, "--ps", "1", "--workers", "1", "--embedding", "hash", "--values", "2000", "--steps", "240", "--seed", "3",
		"--held_out", "256", "--steps_to_live", "40", "--checkpoint_dir", ckpt, "--save_checkpoint_steps", "60", "--save_checkpoint_secs", "0",
		"--stream_dir", stream, "--stream_every", "20", "--connect_timeout", "20s")
	first.waitLine(t, regexp.MustCompile(`^version [0-9]+ `), 60*time.Second)
	first.waitLine(t, regexp.MustCompile(`^version [0-9]+ `), 60*time.Second)
	first.cmd.Process.Kill() // mid-stream, train running
	first.exited(t, 20*time.Second)
	if code, _ := train.exited(t, 120*time.Second); code != 0 {
		t.Fatalf("train exited %d:\n%s\nstderr:\n%s", code, train.out.String(), train.stderr.String())
	}
	var recorded followState
	if b, err := os.ReadFile(state); err != nil || json.Unmarshal(b, &recorded) != nil {
		t.Fatalf("state file after the kill: %q, %v", b, err)
	}
	second := startBinary(t, nil, "checkpoint", "follow", stream, "--once", "--state_file", state, "--save", saved)
	if code, _ := second.exited(t, 60*time.Second); code != 0 {
		t.Fatalf("follower exited %d:\n%s", code, second.stderr.String())
	}
	t.Logf("first follower:\n%ssecond follower, after version %d:\n%s", first.out.String(), recorded.Version, second.out.String())

	// The first printed 1 to m, and recorded m, or m+1 if it was killed
	// between recording a version and printing it; the second printed
	// every version after the one recorded, to the newest.
	vs, _ := filepath.Glob(filepath.Join(stream, "v*.manifest"))
	if len(vs) == 0 {
		t.Fatalf("no version in %s", stream)
	}
	slices.Sort(vs)
	var newest int64
	fmt.Sscanf(filepath.Base(vs[len(vs)-1]), "v%d.manifest", &newest)
	a, b := printedVersions(first.out.String()), printedVersions(second.out.String())
	if len(a) < 2 || !consecutive(a, 1) || (recorded.Version != a[len(a)-1] && recorded.Version != a[len(a)-1]+1) {
		t.Fatalf("the first follower printed %v and recorded %d", a, recorded.Version)
	}
	if recorded.Version < newest && (len(b) == 0 || !consecutive(b, recorded.Version+1) || b[len(b)-1] != newest) {
		t.Fatalf("the second follower, after version %d, printed %v; the newest is %d", recorded.Version, b, newest)
	}
	if !strings.Contains(second.out.String(), fmt.Sprintf("at version %d: ", newest)) {
		t.Fatalf("the second follower did not end at version %d:\n%s", newest, second.out.String())
	}
	compareTables(t, ckpt, saved, "embedding/part_0")
}

// printedVersions returns the versions a follower's output says it
// applied.
func printedVersions(out string) []int64 {
	var vs []int64
	for _, line := range strings.Split(out, "\n") {
		var v int64
		if _, err := fmt.Sscanf(line, "version %d ", &v); err == nil {
			vs = append(vs, v)
		}
	}
	return vs
}

// consecutive says whether vs are from, from+1, ...
func consecutive(vs []int64, from int64) bool {
	for i, v := range vs {
		if v != from+int64(i) {
			return false
		}
	}
	return true
}

// compareTables fails unless the table name saved at followed holds the
// rows of the newest checkpoint in dir, whatever their order.
func compareTables(t *testing.T, dir, followed, name string) {
	t.Helper()
	prefix, err := checkpoint.Latest(dir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		values          string
		freq, versionAt int64
	}
	rows := func(prefix string) map[int64]row {
		r, err := checkpoint.Open(prefix)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var ts [4][]byte
		for i, s := range []string{"-keys", "-values", "-freqs", "-versions"} {
			x, err := r.Read(name + s)
			if err != nil {
				t.Fatalf("%s: %v", prefix, err)
			}
			ts[i] = x.Data
		}
		ids, vals := tensor.View[int64](ts[0]), tensor.View[float32](ts[1])
		freqs, versions := tensor.View[int64](ts[2]), tensor.View[int64](ts[3])
		out := map[int64]row{}
		for i, id := range ids {
			d := len(vals) / len(ids)
			out[id] = row{fmt.Sprint(vals[i*d : (i+1)*d]), freqs[i], versions[i]}
		}
		return out
	}
	ps, got := rows(prefix), rows(followed)
	if len(ps) == 0 {
		t.Fatalf("%s holds no rows of %s: nothing compared", prefix, name)
	}
	for id, r := range ps {
		if g, ok := got[id]; !ok || g != r {
			t.Fatalf("%s: id %d: the ps saved %+v, the follower %+v (present %v)", name, id, r, g, ok)
		}
	}
	if len(got) != len(ps) {
		t.Fatalf("%s: the follower has %d rows, the ps %d", name, len(got), len(ps))
	}
	if _, err := os.Stat(prefix + ".index"); err != nil {
		t.Fatal(err)
	}
}
