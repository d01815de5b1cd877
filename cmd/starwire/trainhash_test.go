package main

import (
	"math"
	"strings"
	"testing"
)

// TestTrainHashEmbedding trains with --embedding hash on two ps tasks:
// the held-out loss must drop, and the training line says what the
// table is.
func TestTrainHashEmbedding(t *testing.T) {
	code, out, errOut := runMain(t, "train", "--embedding", "hash", "--ps", "2", "--values", "2000", "--filter_freq", "2",
		"--steps", "150", "--seed", "3", "--held_out", "2048", "--afxdp", "off")
	if code != 0 {
		t.Fatalf("train --embedding hash: exit %d: %s", code, errOut)
	}
	initial, final := heldOutLoss(t, out)
	t.Logf("held-out loss %.4f -> %.4f", initial, final)
	if final > 0.85*initial {
		t.Errorf("held-out loss %.4f -> %.4f with --embedding hash, want a drop of at least 15%%", initial, final)
	}
	if want := "embedding hash (64-bit ids, 2000 values per field, filter_freq 2)"; !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestTrainHashEmbeddingFlags: flags of the one table given with the
// other, or that --embedding hash cannot honor yet, are refused naming
// the flag and why.
func TestTrainHashEmbeddingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--filter_freq", "3"}, "train: --filter_freq 3, want 0 with the fixed table (admission is the hash embedding's: --embedding hash)"},
		{[]string{"--steps_to_live", "100"}, "train: --steps_to_live 100, want 0 with the fixed table (eviction is the hash embedding's: --embedding hash)"},
		{[]string{"--embedding", "dense"}, `train: --embedding "dense", want "fixed" or "hash"`},
		{[]string{"--embedding", "hash", "--filter_freq", "-2"}, "train: --filter_freq -2, want >= 0"},
		{[]string{"--embedding", "hash", "--vocab", "5000"}, "train: --vocab sizes the fixed table, and --embedding hash has none: --values sets the click data's values per field"},
		{[]string{"--embedding", "hash", "--steps_to_live", "100"}, "train: --steps_to_live evicts rows when a checkpoint is saved: give --checkpoint_dir"},
		{[]string{"--values", "-1"}, "train: --values -1, want >= 0"},
	} {
		code, _, errOut := runMain(t, append([]string{"train"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("train %s: exit %d, %q; want exit 2 saying %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

// TestREADMEHashEmbedding runs the README's hash embedding command as
// written, shortened to 100 steps per worker.
func TestREADMEHashEmbedding(t *testing.T) {
	cmd := strings.TrimSpace(indentedBlock(t, readme(t), "**Hash embedding.**"))
	args, ok := strings.CutPrefix(cmd, "starwire ")
	if !ok || strings.Contains(args, "\n") {
		t.Fatalf("README's hash embedding block is %q, want one starwire command", cmd)
	}
	code, out, errOut := runMain(t, append(strings.Fields(args), "--steps", "100", "--held_out", "2048", "--afxdp", "off")...)
	if code != 0 {
		t.Fatalf("%s: exit %d: %s", cmd, code, errOut)
	}
	if initial, final := heldOutLoss(t, out); final >= initial {
		t.Errorf("%s: held-out loss %.4f -> %.4f", cmd, initial, final)
	}
}

// TestTrainHashEmbeddingCheckpoints: a run with --embedding hash saves
// its checkpoints in --checkpoint_dir, evicting with --steps_to_live, and
// the next run, on another number of ps tasks, restores the newest and
// goes on from its global step.
func TestTrainHashEmbeddingCheckpoints(t *testing.T) {
	dir := t.TempDir()
	args := []string{"train", "--embedding", "hash", "--values", "2000", "--steps", "100", "--held_out", "1024", "--afxdp", "off",
		"--checkpoint_dir", dir, "--save_checkpoint_steps", "50", "--steps_to_live", "1000"}
	code, out, errOut := runMain(t, append(args, "--ps", "2")...)
	if code != 0 {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	_, first := heldOutLoss(t, out)
	if !strings.Contains(out, "model.ckpt-200 (global step 200) in ") {
		t.Fatalf("first run saved no checkpoint at step 200:\n%s\n%s", out, errOut)
	}
	code, out, errOut = runMain(t, append(args, "--ps", "1")...)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, errOut)
	}
	initial, _ := heldOutLoss(t, out)
	if !strings.Contains(out, "restored model.ckpt-200 (global step 200)") {
		t.Errorf("second run did not restore the first's checkpoint:\n%s", out)
	}
	if math.Abs(initial-first) > 1e-3 {
		t.Errorf("second run's initial held-out loss %.4f, the first's final %.4f", initial, first)
	}
}
