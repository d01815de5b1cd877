package train_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/starwire/starwire/handlers/driver"
	"github.com/starwire/starwire/rpc/cluster"
	"github.com/starwire/starwire/tasks"
	"github.com/starwire/starwire/train"
)

// TestProbeCheckpointDir: the probe passes on parameter servers that can
// save into the directory and leaves nothing there; it fails, naming the
// task and why, on one without a checkpoint directory and on one whose
// directory does not cover the one asked for.
func TestProbeCheckpointDir(t *testing.T) {
	covered := t.TempDir()
	for _, tc := range []struct {
		name, taskDir, dir, err string
	}{
		{"covered", covered, covered, ""},
		{"no directory", "", t.TempDir(), "the task has no checkpoint directory"},
		{"not covered", t.TempDir(), t.TempDir(), "lies outside the checkpoint directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := startSession(t, ctx, tc.taskDir)
			err := s.ProbeCheckpointDir(ctx, tc.dir)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("probe: %v", err)
				}
				if left, _ := os.ReadDir(tc.dir); len(left) != 0 {
					t.Errorf("the probe left %d files in %s", len(left), tc.dir)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "/job:ps/replica:0/task:0 cannot save checkpoints in "+tc.dir) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("probe: %v, want ps:0 named and %q", err, tc.err)
			}
		})
	}
}

// startSession starts an in-process cluster of one ps (checkpoints in
// dir) and one worker, and a session of the example's model set up on it.
func startSession(t *testing.T, ctx context.Context, dir string) *train.Session {
	t.Helper()
	local, err := tasks.StartLocal(tasks.LocalOptions{PS: 1, Workers: 1, Protocol: cluster.ProtocolGRPCSeastar,
		Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	peers := tasks.NewPeers(local.Layout)
	t.Cleanup(peers.Close)
	var callers []driver.Caller
	for _, task := range []string{cluster.TaskName("ps", 0), cluster.TaskName("worker", 0)} {
		c, err := peers.Caller(task)
		if err != nil {
			t.Fatal(err)
		}
		callers = append(callers, c)
	}
	m := &numberModel{target: 3, rate: 0.05}
	s := train.NewSession(driver.New("probe-test", callers...), m, train.Options{PS: 1, Workers: 1, Steps: 1})
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// readOnlyDirEnv, when set, names the directory that the test process,
// started by TestProbeReadOnlyCheckpointDir in a mount namespace of its
// own, mounts read-only over itself before it probes it.
const readOnlyDirEnv = "STARWIRE_TEST_READONLY_DIR"

// noMountNS marks the output of a test process that could not mount.
const noMountNS = "mount namespace unavailable: "

// TestProbeReadOnlyCheckpointDir: a checkpoint directory the parameter
// server cannot write, read-only, fails the probe within 5 s, naming the
// task and why, where the run would otherwise be lost at its first save.
// Root writes through permission bits, so the directory is a read-only
// bind mount of itself, made in a mount namespace of the test's own (a
// test process started again in it), which ends with the process.
func TestProbeReadOnlyCheckpointDir(t *testing.T) {
	if dir := os.Getenv(readOnlyDirEnv); dir != "" {
		probeReadOnly(t, dir)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestProbeReadOnlyCheckpointDir$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), readOnlyDirEnv+"="+t.TempDir())
	// Go makes the new namespace's mounts private before it runs the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if i := bytes.Index(out, []byte(noMountNS)); i >= 0 || errors.Is(err, syscall.EPERM) {
		why := fmt.Sprint(err)
		if i >= 0 {
			why, _, _ = strings.Cut(string(out[i+len(noMountNS):]), "\n")
		}
		requireMountNS(t, why)
		return
	}
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestProbeReadOnlyCheckpointDir")) {
		t.Fatalf("the probe in a mount namespace: %v\n%s", err, out)
	}
	if _, after, ok := bytes.Cut(out, []byte("probe failed after ")); ok {
		line, _, _ := bytes.Cut(after, []byte("\n"))
		t.Logf("in the mount namespace, the probe failed after %s", line)
	}
}

// requireMountNS skips t, which needs to mount in a mount namespace of
// its own (root), except under CI=true or STARWIRE_REQUIRE_MOUNTNS=1,
// where it fails: CI runs as root, and a test that skipped there would
// check nothing.
func requireMountNS(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("STARWIRE_REQUIRE_MOUNTNS") == "1" {
		t.Fatalf("the test needs a mount namespace and a read-only bind mount (root): %s", why)
	}
	t.Skipf("no mount namespace here, the read-only directory is not tested (STARWIRE_REQUIRE_MOUNTNS=1 makes this a failure): %s", why)
}

// probeReadOnly, in a mount namespace of its own, mounts dir read-only
// over itself and probes it.
func probeReadOnly(t *testing.T, dir string) {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("%sbind mount %s: %v", noMountNS, dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("%sremount %s read-only: %v", noMountNS, dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("write into the read-only mount: %v, want EROFS", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := startSession(t, ctx, dir)
	pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
	defer pcancel()
	start := time.Now()
	err := s.ProbeCheckpointDir(pctx, dir)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "/job:ps/replica:0/task:0 cannot save checkpoints in "+dir) || !strings.Contains(err.Error(), "read-only file system") {
		t.Fatalf("probe of a read-only directory after %v: %v, want ps:0 named and the file system read-only", took, err)
	}
	t.Logf("probe failed after %v: %v", took, err)
}
