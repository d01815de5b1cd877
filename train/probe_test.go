package train_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

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
	m.s = s
	if err := s.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}
