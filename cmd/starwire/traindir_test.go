package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// deadPid returns the pid of a process that has exited and been reaped.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func trainDirOf(t *testing.T, tmp, name string, pid int) string {
	t.Helper()
	dir := filepath.Join(tmp, trainDirPattern+name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if pid != 0 {
		if err := os.WriteFile(filepath.Join(dir, trainDirOwner), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRemoveStaleTrainDirs: a directory whose owner died (as after kill
// -9) is removed; one whose owner lives, or that names no owner, stays.
func TestRemoveStaleTrainDirs(t *testing.T) {
	tmp := t.TempDir()
	live := exec.Command("sleep", "60")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	dead := trainDirOf(t, tmp, "dead", deadPid(t))
	kept := []string{
		trainDirOf(t, tmp, "live", live.Process.Pid),
		trainDirOf(t, tmp, "self", os.Getpid()),
		trainDirOf(t, tmp, "unowned", 0),
	}
	if got := removeStaleTrainDirs(tmp, staleTrainDirsMax); !slices.Equal(got, []string{dead}) {
		t.Errorf("removed %v, want only %s", got, dead)
	}
	for _, dir := range kept {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: %v, want it kept", dir, err)
		}
	}
}

// TestRemoveStaleTrainDirsBounded: one start looks at a bounded number of
// directories, the rest are left for the next.
func TestRemoveStaleTrainDirsBounded(t *testing.T) {
	tmp := t.TempDir()
	pid := deadPid(t)
	for i := range 5 {
		trainDirOf(t, tmp, strconv.Itoa(i), pid)
	}
	if got := removeStaleTrainDirs(tmp, 3); len(got) != 3 {
		t.Errorf("removed %d of 5 with a bound of 3: %v", len(got), got)
	}
	if got := removeStaleTrainDirs(tmp, 3); len(got) != 2 {
		t.Errorf("second start removed %d, want the 2 left: %v", len(got), got)
	}
}

// TestTrainDirRecordsOwner: the directory a local train makes names its
// pid, and a stale one in the temporary directory is gone once it is made.
func TestTrainDirRecordsOwner(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	stale := trainDirOf(t, tmp, "stale", deadPid(t))
	dir, err := makeTrainDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b, err := os.ReadFile(filepath.Join(dir, trainDirOwner))
	if err != nil || string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("owner file %q, %v; want this pid", b, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s: %v, want it removed", stale, err)
	}
}
