package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestClusterUpUnprivilegedLeavesNothing runs "cluster up" as a user who
// may not make namespaces: it fails in one line saying so, and leaves no
// state directory in the temporary directory it would have used.
func TestClusterUpUnprivilegedLeavesNothing(t *testing.T) {
	tmp, err := os.MkdirTemp("", "starwire-unpriv")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := unprivileged(t, "cluster", "up", "--name", "nu")
	cmd.Env = append(os.Environ(), "TF_CONFIG=", "TMPDIR="+tmp)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "needs root") {
		t.Fatalf("cluster up unprivileged: %v, stderr %q; want exit 1 saying it needs root", cmd.ProcessState, stderr.String())
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("cluster up left %s in its temporary directory", e.Name())
	}
}
