package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTrainIncrements trains --embedding hash with a full checkpoint
// every 120 global steps and an increment every 20 between, at most 2 a
// full checkpoint: the run says how many of each it saved, and checkpoint
// inspect --list shows the full checkpoints, each followed by its
// increments, never more than 2.
func TestTrainIncrements(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	code, out, errOut := runMain(t, "train", "--afxdp", "off", "--embedding", "hash", "--ps", "2", "--values", "20000", "--held_out", "256",
		"--steps", "100", "--checkpoint_dir", dir, "--save_checkpoint_steps", "120", "--save_checkpoint_secs", "0",
		"--save_incremental_checkpoint_steps", "20", "--max_incremental_checkpoints", "2")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s\n%s", code, out, errOut)
	}
	if !regexp.MustCompile(`checkpoints? and [1-9][0-9]* increments? saved this run`).MatchString(out) {
		t.Fatalf("the run does not say it saved increments:\n%s", out)
	}
	code, list, errOut := runCapture("checkpoint", "inspect", dir, "--list")
	if code != 0 {
		t.Fatalf("checkpoint inspect --list: exit %d\n%s", code, errOut)
	}
	t.Logf("checkpoint inspect --list:\n%s", list)
	line := regexp.MustCompile(`(?m)^(full|increment) +(\S+)  global step (\d+)  `)
	var kinds []string
	for _, m := range line.FindAllStringSubmatch(list, -1) {
		kinds = append(kinds, m[1])
		if m[1] == "increment" && !strings.HasPrefix(m[2], ".incremental_checkpoint/model.ckpt-") {
			t.Errorf("increment %s lies outside .incremental_checkpoint/<its full checkpoint>", m[2])
		}
	}
	run := 0
	for _, k := range kinds {
		if run = run + 1; k == "full" {
			run = 0
		}
		if run > 2 {
			t.Fatalf("listed %v: more than --max_incremental_checkpoints 2 increments of a full checkpoint:\n%s", kinds, list)
		}
	}
	if len(kinds) < 3 || kinds[0] != "full" || kinds[1] != "increment" || kinds[len(kinds)-1] != "full" {
		t.Fatalf("listed %v, want a full checkpoint, its increments, ..., the final full one:\n%s", kinds, list)
	}
}

// TestTrainOneSaveAtTheLastStep: one worker's 60 steps, a full
// checkpoint every 25 and an increment every 10 between: the increment
// due at step 60, the last, is not saved, as the final full checkpoint
// is; the run saves full 25, increments 35 and 45, full 50 and full 60.
func TestTrainOneSaveAtTheLastStep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	code, out, errOut := runMain(t, "train", "--afxdp", "off", "--embedding", "hash", "--workers", "1", "--values", "2000", "--held_out", "64",
		"--steps", "60", "--checkpoint_dir", dir, "--save_checkpoint_steps", "25", "--save_checkpoint_secs", "0",
		"--save_incremental_checkpoint_steps", "10", "--keep_checkpoint_max", "0")
	if code != 0 {
		t.Fatalf("train: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "3 checkpoints and 2 increments saved this run") {
		t.Errorf("the run says:\n%s\nwant 3 checkpoints and 2 increments saved", out)
	}
	code, list, errOut := runCapture("checkpoint", "inspect", dir, "--list")
	if code != 0 {
		t.Fatalf("checkpoint inspect --list: exit %d\n%s", code, errOut)
	}
	var saves []string
	for _, m := range regexp.MustCompile(`(?m)^(full|increment) +\S+  global step (\d+)  `).FindAllStringSubmatch(list, -1) {
		saves = append(saves, m[1]+" "+m[2])
	}
	if want := "full 25, increment 35, increment 45, full 50, full 60"; strings.Join(saves, ", ") != want {
		t.Fatalf("saved %v, want %s:\n%s", saves, want, list)
	}
}

// TestTrainIncrementFlags: increments of the fixed table, or without
// --checkpoint_dir, are refused.
func TestTrainIncrementFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--save_incremental_checkpoint_steps", "10", "--checkpoint_dir", t.TempDir()}, "the fixed table's checkpoints are full"},
		{[]string{"--embedding", "hash", "--save_incremental_checkpoint_secs", "10"}, "increments are saved in --checkpoint_dir: give it"},
		{[]string{"--embedding", "hash", "--save_incremental_checkpoint_steps", "-1"}, "--save_incremental_checkpoint_steps -1, want >= 0"},
		{[]string{"--embedding", "hash", "--max_incremental_checkpoints", "-1"}, "--max_incremental_checkpoints -1, want >= 0"},
	} {
		code, _, errOut := runMain(t, append([]string{"train"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("train %v: exit %d, %q; want exit 2 and %q", tc.args, code, errOut, tc.want)
		}
	}
}
