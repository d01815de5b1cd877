package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/starwire/starwire/handlers/checkpoint"
)

// TestTrainCheckpoints trains with --checkpoint_dir on the local cluster:
// the checkpoints hold the partitioned table, its accumulator and the
// global step, the state keeps --keep_checkpoint_max of them, and a second
// run resumes from the newest.
func TestTrainCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	common := []string{"train", "--afxdp", "off", "--vocab", "1000", "--held_out", "256", "--batch_size", "64", "--ps", "2",
		"--checkpoint_dir", dir, "--save_checkpoint_steps", "100", "--save_checkpoint_secs", "0", "--keep_checkpoint_max", "2"}
	code, out, errOut := runMain(t, append(common, "--steps", "200")...)
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "no checkpoint in "+dir) || !strings.Contains(out, "saved "+filepath.Join(dir, "model.ckpt-400")+" (global step 400)") {
		t.Fatalf("first run did not say it started afresh and saved step 400:\n%s", out)
	}
	st, err := checkpoint.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Two workers save every 100 global steps of 400: at least 3, of which
	// the newest 2 are kept.
	if st.ModelCheckpointPath != "model.ckpt-400" || len(st.AllModelCheckpointPaths) != 2 {
		t.Fatalf("state %+v, want model.ckpt-400 and one older", st)
	}
	code, inspect, errOut := runCapture("checkpoint", "inspect", filepath.Join(dir, "model.ckpt-400"))
	want := "embedding (DT_FLOAT) [1000,8]\nembedding/Adagrad (DT_FLOAT) [1000,8]\nglobal_step (DT_INT64) []\n"
	if code != 0 || !strings.HasPrefix(inspect, want) {
		t.Fatalf("checkpoint inspect: exit %d\n%s\n%s\nwant\n%s", code, inspect, errOut, want)
	}
	code, out, errOut = runMain(t, append(common, "--steps", "10", "--ps", "3")...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "restored model.ckpt-400 (global step 400)") || !strings.Contains(out, "(global step 420)") {
		t.Fatalf("second run did not resume from step 400 to 420:\n%s", out)
	}
	if p, err := checkpoint.Latest(dir); err != nil || p != filepath.Join(dir, "model.ckpt-420") {
		t.Fatalf("newest checkpoint %s, %v; want model.ckpt-420", p, err)
	}
}

// TestCheckpointFlags refuses negative counts.
func TestCheckpointFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"--save_checkpoint_steps", "-1"}, "--save_checkpoint_steps -1, want >= 0"},
		{[]string{"--save_checkpoint_secs", "-2"}, "--save_checkpoint_secs -2, want >= 0"},
		{[]string{"--keep_checkpoint_max", "-3"}, "--keep_checkpoint_max -3, want >= 0"},
	} {
		f, err := parseTrain(t, c.args...)
		if err == nil {
			err = f.ckpt.prepare()
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: %v, want %q", c.args, err, c.err)
		}
	}
	f, err := parseTrain(t, "--checkpoint_dir", "rel")
	if err == nil {
		t.Chdir(t.TempDir())
		err = f.ckpt.prepare()
	}
	if err != nil || !filepath.IsAbs(f.ckpt.dir) || f.ckpt.keep != 5 {
		t.Errorf("--checkpoint_dir rel: %+v, %v; want an absolute dir, keep 5", f.ckpt, err)
	}
}

// TestTrainProbesCheckpointDir: a ps that cannot save into train's
// --checkpoint_dir (started without one, or with one that does not cover
// it) fails the run before its first step, within 5 s of joining the
// cluster, naming the task and why; without the probe the run trained to
// the end and lost it at the first save.
func TestTrainProbesCheckpointDir(t *testing.T) {
	t.Parallel() // runs separate processes, which wait more than they compute
	for _, tc := range []struct {
		name string
		ps   string // the ps's --checkpoint_dir, "" for none
		want string
	}{
		{"no directory", "", "the task has no checkpoint directory"},
		{"not covered", t.TempDir(), "lies outside the checkpoint directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // a cluster of its own
			dir := t.TempDir()
			for _, task := range []string{"ps:0", "worker:0", "worker:1"} {
				job, idx, _ := strings.Cut(task, ":")
				args := []string{"serve", "--job", job, "--task", idx, "--ps", "1", "--workers", "2", "--registry_dir", dir, "--report", "0"}
				if job == "ps" && tc.ps != "" {
					args = append(args, "--checkpoint_dir", tc.ps)
				}
				startBinary(t, nil, args...)
			}
			ckpt := filepath.Join(t.TempDir(), "ckpt")
			p := startBinary(t, nil, "train", "--registry_dir", dir, "--steps", "1000000", "--checkpoint_dir", ckpt, "--progress", "100ms")
			p.waitLine(t, regexp.MustCompile(`^joining cluster: `), 30*time.Second)
			joined := time.Now()
			code, at := p.exited(t, 30*time.Second)
			msg, out := p.stderr.String(), p.out.String()
			if code == 0 || !strings.Contains(msg, "/job:ps/replica:0/task:0 cannot save checkpoints in "+ckpt) || !strings.Contains(msg, tc.want) {
				t.Fatalf("train exited %d: want an error naming ps:0 and %q\nstdout:\n%s\nstderr:\n%s", code, tc.want, out, msg)
			}
			if took := at.Sub(joined); took > 5*time.Second || strings.Contains(out, "\nstep ") {
				t.Errorf("train failed %v after joining, want before step 1 and within 5 s:\n%s", took, out)
			}
		})
	}
}

// TestTrainSavesOnSignal: SIGINT in the middle of a run with
// --checkpoint_dir and no periodic saves leaves a checkpoint of the
// global step the run stopped at, the newest of the directory, and train
// exits with SIGINT's status.
func TestTrainSavesOnSignal(t *testing.T) {
	t.Parallel() // a process of its own, which waits more than it computes
	dir := filepath.Join(t.TempDir(), "ckpt")
	p := startBinary(t, nil, "train", "--afxdp", "off", "--vocab", "1000", "--held_out", "256", "--batch_size", "64",
		"--steps", "1000000", "--checkpoint_dir", dir, "--save_checkpoint_secs", "0", "--progress", "100ms")
	p.waitStep(t, 100, 60*time.Second)
	p.cmd.Process.Signal(syscall.SIGINT)
	code, _ := p.exited(t, 60*time.Second)
	out := p.out.String()
	if code != 128+int(syscall.SIGINT) {
		t.Fatalf("train exited %d after SIGINT, want %d:\n%s\nstderr:\n%s", code, 128+int(syscall.SIGINT), out, p.stderr.String())
	}
	m := regexp.MustCompile(`(?m)^saved (\S+) \(global step (\d+)\) in `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no checkpoint saved after SIGINT:\n%s", out)
	}
	if step := atoi(m[2]); step < 100 || m[1] != filepath.Join(dir, "model.ckpt-"+m[2]) {
		t.Errorf("saved %s at global step %d: want model.ckpt-<step> of the step stopped at, at least 100", m[1], step)
	}
	if latest, err := checkpoint.Latest(dir); err != nil || latest != m[1] {
		t.Errorf("newest checkpoint %s, %v; want %s", latest, err, m[1])
	}
}
